package web_test

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web"
)

func TestClientIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		addr   string
		prefix int
		want   string
	}{
		{"IPv4 as is", "203.0.113.7", 64, "203.0.113.7"},
		{"IPv4 with spaces", " 203.0.113.7 ", 64, "203.0.113.7"},
		{"IPv6 to its /64", "2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"another address of the same /64", "2001:db8:1:2::ffff", 64, "2001:db8:1:2::/64"},
		{"the next /64 is another client", "2001:db8:1:3::1", 64, "2001:db8:1:3::/64"},
		{"IPv6 written long", "2001:0db8:0001:0002:0000:0000:0000:0001", 64, "2001:db8:1:2::/64"},
		{"a /56", "2001:db8:1:2ff::1", 56, "2001:db8:1:200::/56"},
		{"a /48", "2001:db8:1:2ff::1", 48, "2001:db8:1::/48"},
		{"prefix 128: the address alone", "2001:db8::1", 128, "2001:db8::1/128"},
		{"IPv4-mapped IPv6 is the IPv4 client", "::ffff:203.0.113.7", 64, "203.0.113.7"},
		{"IPv4-mapped, written in hex", "::ffff:cb00:7107", 64, "203.0.113.7"},
		{"loopback", "::1", 64, "::/64"},
		{"a zone is dropped", "fe80::1:2%eth0", 64, "fe80::/64"},
		{"garbage is its own client", "not an address", 64, "not an address"},
		{"an address with a port is no address", "203.0.113.7:443", 64, "203.0.113.7:443"},
		{"empty", "", 64, ""},
	}
	for _, tt := range tests {
		if got := web.ClientIdentity(tt.addr, tt.prefix); got != tt.want {
			t.Errorf("%s: ClientIdentity(%q, %d) = %q, want %q", tt.name, tt.addr, tt.prefix, got, tt.want)
		}
	}
}

// behindProxy makes the test's own address (127.0.0.1) a trusted proxy,
// so that X-Forwarded-For names the client.
func behindProxy(cfg *config.Config) {
	_, loopback, _ := net.ParseCIDR("127.0.0.1/32")
	cfg.TrustedProxies = []*net.IPNet{loopback}
}

// answer is a status, header and body, for requests sent from
// goroutines (which must not stop the test).
type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

func send(method, target string, header http.Header, body string) answer {
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func orderHeader(from string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {newKey()}, "X-Forwarded-For": {from}}
}

// newKey is a random Idempotency-Key.
func newKey() string { return rand.Text() }

// An ordinary IPv6 customer holds a whole /64, so its addresses are one
// client: nine addresses of one /64 ordering at once with
// OPEN_ORDERS_PER_CLIENT=3 make three orders and six 429s, and a limited
// print's last unit is still there for the next buyer, from another /64.
func TestOneSlash64IsOneClientForOpenOrders(t *testing.T) {
	t.Parallel()
	c := newConsole(t, behindProxy)
	c.orders.OpenPerClient = 3
	testenv.MustCreateProduct(t, c.db, "PRINT", 250000, 4)
	body := `{"customer_email":"b@example.com","items":[{"sku":"PRINT","qty":1}]}`

	answers := make([]answer, 9)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-start
			answers[i] = send("POST", c.URL+"/api/orders", orderHeader(fmt.Sprintf("2001:db8:1:2::%x", i+1)), body)
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("order %d: %v", i+1, a.err)
		}
		counts[a.status]++
		if a.status == http.StatusTooManyRequests && !strings.Contains(a.body, `"code":"too_many_requests"`) {
			t.Errorf("a refused order: %s, want the code too_many_requests", a.body)
		}
	}
	if counts[http.StatusCreated] != 3 || counts[http.StatusTooManyRequests] != 6 {
		t.Errorf("nine addresses of one /64 at once: %v, want 3 × 201 and 6 × 429", counts)
	}
	var mine, stock int64
	c.db.Raw("SELECT count(*) FROM orders WHERE client_addr = '2001:db8:1:2::/64'").Scan(&mine)
	c.db.Raw("SELECT stock FROM products WHERE sku = 'PRINT'").Scan(&stock)
	if mine != 3 || stock != 1 {
		t.Errorf("%d orders of the /64, stock %d left; want 3 and 1", mine, stock)
	}
	// The next /64 is another customer: the last print is theirs.
	if a := send("POST", c.URL+"/api/orders", orderHeader("2001:db8:1:3::1"), body); a.status != http.StatusCreated {
		t.Errorf("another /64's order: %d %s %v, want 201", a.status, a.body, a.err)
	}
}

// The log-in throttle counts failures per client too: five wrong
// passwords from five addresses of one /64, each for another email, and
// the sixth address of it is refused even with the right password —
// while another /64 logs in. The refused log-ins are one row of the
// /64's.
func TestLogInThrottleCountsTheSlash64(t *testing.T) {
	t.Parallel()
	c := newConsole(t, behindProxy)
	login := func(from, email, password string) page {
		return c.do(c.newClient(), "POST", "/admin/login", strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {c.URL},
				"X-Forwarded-For": {from}})
	}
	for i := range admins.MaxFailures {
		if p := login(fmt.Sprintf("2001:db8:7:1::%x", i+1), fmt.Sprintf("guess%d@example.com", i), "guess"); p.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i+1, p.StatusCode)
		}
	}
	if p := login("2001:db8:7:1:ffff::1", adminEmail, adminPassword); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the right password from a sixth address of the /64: status %d, want 429", p.StatusCode)
	}
	if p := login("2001:db8:7:2::1", adminEmail, adminPassword); p.StatusCode != http.StatusSeeOther {
		t.Errorf("the right password from another /64: status %d, want 303", p.StatusCode)
	}
	// One row per client and 15 minutes (two if the test spans the turn
	// of a window).
	var rows []models.AdminAction
	c.db.Where("result = ?", models.ActionRefused).Find(&rows)
	counted := 0
	for _, r := range rows {
		if r.RemoteAddr != "2001:db8:7:1::/64" {
			t.Errorf("a refused log-in row of %q, want the /64's", r.RemoteAddr)
		}
		counted += r.Count
	}
	if len(rows) == 0 || len(rows) > 2 || counted != admins.MaxFailures+1 {
		t.Errorf("%d refused log-in rows counting %d, want one (per window) counting %d", len(rows), counted, admins.MaxFailures+1)
	}
}

// Refused callback deliveries cost at most a client's budget of rows a
// minute: a sender of bad signatures from a new address of its /64 each
// time still writes no more than that, and each row keeps its address.
func TestRefusedRowBudgetCountsTheSlash64(t *testing.T) {
	t.Parallel()
	c := newConsole(t, behindProxy)
	const sent, budget = 70, 60 // the budget: app/payments refusedPerClient
	var prefix string
	// The budget is per minute of the clock: a round that spans two
	// minutes had two budgets, and is sent again from another /64.
	for round := 0; ; round++ {
		prefix = fmt.Sprintf("2001:db8:%x:1:", 100+round)
		minute := time.Now().Truncate(time.Minute)
		for i := range sent {
			a := send("POST", c.URL+"/callbacks/sandbox", http.Header{"Content-Type": {"application/json"},
				"X-Forwarded-For": {fmt.Sprintf("%s:%x", prefix, i+1)}}, "{}")
			if a.err != nil || a.status != http.StatusUnauthorized {
				t.Fatalf("an unsigned delivery: %d %s %v, want 401", a.status, a.body, a.err)
			}
		}
		if time.Now().Truncate(time.Minute).Equal(minute) {
			break
		}
	}
	c.payments.Close() // writes the queued rows
	var rows, addrs int64
	c.db.Raw("SELECT count(*), count(DISTINCT remote_addr) FROM callback_deliveries WHERE remote_addr LIKE ?", prefix+"%").
		Row().Scan(&rows, &addrs)
	if rows != budget || addrs != budget {
		t.Errorf("%d refused deliveries from %d addresses of one /64 wrote %d rows from %d addresses; want the budget, %d, each its own",
			sent, sent, rows, addrs, budget)
	}
}
