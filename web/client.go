package web

import (
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// ClientIdentity is who the per-client limits count a request from addr
// as (the unpaid orders per client, the log-in throttle per address, the
// refused-delivery row budget): an IPv4 address is itself; an IPv6
// address is its network of ipv6Prefix bits (CLIENT_IPV6_PREFIX, 64 by
// default), written as a prefix such as "2001:db8:1:2::/64", because one
// ordinary IPv6 customer is given a whole /64 and can pick a new address
// from it for every request. An IPv4-mapped IPv6 address (::ffff:a.b.c.d)
// is the IPv4 client it maps, and a zone (fe80::1%eth0) is dropped. Text
// that is no address is its own identity, so it is still counted.
func ClientIdentity(addr string, ipv6Prefix int) string {
	ip, err := netip.ParseAddr(strings.TrimSpace(addr))
	if err != nil {
		return addr
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(ipv6Prefix)
	if err != nil { // a prefix length config.Load would not allow
		return ip.String()
	}
	return p.String()
}

// client is the identity the per-client limits count this request as:
// its address (c.RealIP, see clientIP) grouped by ClientIdentity. The
// address itself is what logs and delivery rows keep.
func (s *Server) client(c echo.Context) string {
	return ClientIdentity(c.RealIP(), s.cfg.ClientIPv6Prefix)
}
