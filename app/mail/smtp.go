package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sekali/sekali/app/tracing"
)

// SMTP sends through an SMTP server given as smtp://user:pass@host:port
// (plain, upgraded with STARTTLS when the server offers it and there are
// credentials to protect) or smtps://user:pass@host:port (TLS from the
// first byte, "implicit TLS", port 465 by default).
type SMTP struct {
	addr string
	auth smtp.Auth
	host string
	// TLS is the configuration of smtps:// connections; nil for smtp://.
	// Tests set RootCAs to trust their own server.
	TLS *tls.Config
}

// NewSMTP parses an SMTP_URL.
func NewSMTP(rawURL string) (*SMTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "smtp" && u.Scheme != "smtps") {
		return nil, fmt.Errorf("mail: SMTP_URL is not smtp://host:port or smtps://host:port")
	}
	defaultPort := "25"
	if u.Scheme == "smtps" {
		defaultPort = "465"
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, defaultPort
	}
	s := &SMTP{addr: net.JoinHostPort(host, port), host: host}
	if u.Scheme == "smtps" {
		s.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		s.auth = smtp.PlainAuth("", u.User.Username(), pass, host)
	}
	return s, nil
}

// Send implements Mailer: one SMTP session per message, bounded by ctx
// (or 30 seconds), in a span of the trace in ctx.
func (s *SMTP) Send(ctx context.Context, m Message) (err error) {
	ctx, span := tracing.Start(ctx, "mail.send", attribute.String("server.address", s.host))
	defer func() { tracing.End(span, err) }()
	return s.send(ctx, m)
}

func (s *SMTP) send(ctx context.Context, m Message) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	conn, err := (&net.Dialer{Deadline: deadline}).DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return err
	}
	conn.SetDeadline(deadline)
	if s.TLS != nil {
		tc := tls.Client(conn, s.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("mail: TLS with %s: %w", s.addr, err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if s.auth != nil && s.TLS == nil {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(nil); err != nil {
				return err
			}
		}
	}
	if s.auth != nil {
		if err := c.Auth(s.auth); err != nil {
			return err
		}
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("mail: From %q: %w", m.From, err)
	}
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(m.To); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(format(m)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// format renders the message with the headers receivers deduplicate on.
func format(m Message) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Message-ID: <%s>\r\n", m.MessageID)
	fmt.Fprintf(&b, "From: %s\r\n", m.From)
	fmt.Fprintf(&b, "To: %s\r\n", m.To)
	fmt.Fprintf(&b, "Subject: %s\r\n", mime(m.Subject))
	fmt.Fprintf(&b, "Date: %s\r\n", time.Now().UTC().Format(time.RFC1123Z))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	b.WriteString(strings.ReplaceAll(m.Body, "\n", "\r\n"))
	return b.Bytes()
}

// mime keeps header values on one line.
func mime(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
