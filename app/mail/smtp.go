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
//
// A session stays open after its message, for the next one: up to
// maxIdleSessions of them, each for at most idleSessionFor. A new session
// costs a TCP connection, the server's greeting, EHLO, and — with
// credentials — a TLS handshake and AUTH; a kept one costs none of them.
type SMTP struct {
	addr string
	auth smtp.Auth
	host string
	// TLS is the configuration of smtps:// connections; nil for smtp://.
	// Tests set RootCAs to trust their own server.
	TLS  *tls.Config
	idle chan *session
	now  func() time.Time // the clock of the sessions' idle times
}

const (
	// maxIdleSessions bounds the sessions kept open between messages;
	// more senders at once open more, and close them after their message.
	maxIdleSessions = 8
	// idleSessionFor is how long a session is kept without a message.
	// Servers end idle sessions on their own (RFC 5321 asks them to wait
	// five minutes; many wait less): a session they ended is noticed at
	// its next MAIL, and the message goes over a new one.
	idleSessionFor = 30 * time.Second
	// quitTimeout bounds the QUIT that ends a session kept open.
	quitTimeout = 5 * time.Second
)

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
	s := &SMTP{addr: net.JoinHostPort(host, port), host: host, idle: make(chan *session, maxIdleSessions), now: time.Now}
	if u.Scheme == "smtps" {
		s.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		s.auth = smtp.PlainAuth("", u.User.Username(), pass, host)
	}
	return s, nil
}

// Send implements Mailer: the message goes over a session kept open from
// an earlier one, or a new session, bounded by ctx (or 30 seconds), in a
// span of the trace in ctx.
func (s *SMTP) Send(ctx context.Context, m Message) (err error) {
	ctx, span := tracing.Start(ctx, "mail.send", attribute.String("server.address", s.host))
	defer func() { tracing.End(span, err) }()
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("mail: From %q: %w", m.From, err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	if ss := s.takeIdle(); ss != nil {
		began, err := ss.transact(deadline, from.Address, m)
		if err == nil {
			span.SetAttributes(attribute.Bool("sekali.smtp.session_reused", true))
			s.keep(ss)
			return nil
		}
		ss.c.Close()
		if began {
			return err
		}
		// The server refused MAIL on the kept session (it had ended it,
		// or it limits messages per session): no message began, so a new
		// session cannot send this one twice.
	}
	ss, err := s.dial(ctx, deadline)
	if err != nil {
		return err
	}
	if _, err := ss.transact(deadline, from.Address, m); err != nil {
		ss.c.Close()
		return err
	}
	s.keep(ss)
	return nil
}

// Close ends the sessions kept open, each with QUIT. Send may be called
// after it; it then opens sessions again.
func (s *SMTP) Close() {
	for {
		select {
		case ss := <-s.idle:
			ss.quit()
		default:
			return
		}
	}
}

// session is one SMTP session, ready for a message's MAIL.
type session struct {
	conn net.Conn
	c    *smtp.Client
	used time.Time // when its last message was accepted
}

// dial opens a session: TCP (and TLS for smtps://), the greeting, EHLO,
// STARTTLS when there are credentials to protect, AUTH.
func (s *SMTP) dial(ctx context.Context, deadline time.Time) (*session, error) {
	conn, err := (&net.Dialer{Deadline: deadline}).DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(deadline)
	if s.TLS != nil {
		tc := tls.Client(conn, s.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("mail: TLS with %s: %w", s.addr, err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if s.auth != nil && s.TLS == nil {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(nil); err != nil {
				c.Close()
				return nil, err
			}
		}
	}
	if s.auth != nil {
		if err := c.Auth(s.auth); err != nil {
			c.Close()
			return nil, err
		}
	}
	return &session{conn: conn, c: c}, nil
}

// transact sends m in one mail transaction: MAIL, RCPT, DATA. began is
// false when the server refused MAIL, before any of the message was sent.
func (ss *session) transact(deadline time.Time, from string, m Message) (began bool, err error) {
	ss.conn.SetDeadline(deadline)
	if err := ss.c.Mail(from); err != nil {
		return false, err
	}
	if err := ss.c.Rcpt(m.To); err != nil {
		return true, err
	}
	w, err := ss.c.Data()
	if err != nil {
		return true, err
	}
	if _, err := w.Write(format(m)); err != nil {
		return true, err
	}
	return true, w.Close()
}

// takeIdle returns a kept session that has not been idle too long, or nil.
// One idle too long is closed without QUIT: a server that stopped
// answering it must not hold up the message waiting to go.
func (s *SMTP) takeIdle() *session {
	for {
		select {
		case ss := <-s.idle:
			if s.now().Sub(ss.used) < idleSessionFor {
				return ss
			}
			ss.c.Close()
		default:
			return nil
		}
	}
}

// keep keeps ss open for the next message, or ends it when enough are.
func (s *SMTP) keep(ss *session) {
	ss.used = s.now()
	select {
	case s.idle <- ss:
	default:
		ss.quit()
	}
}

// quit ends the session politely, within quitTimeout.
func (ss *session) quit() {
	ss.conn.SetDeadline(time.Now().Add(quitTimeout))
	if err := ss.c.Quit(); err != nil {
		ss.c.Close()
	}
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
