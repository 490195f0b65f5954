package testenv

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTPServer is a real SMTP listener of the test's own that keeps what it
// receives, so tests can count messages and Message-IDs.
type SMTPServer struct {
	Addr string

	mu       sync.Mutex
	messages []ReceivedMail
	opened   int                 // sessions ever opened
	open     map[*smtp.Conn]bool // sessions open now
	refused  string              // a recipient RCPT refuses
	// DataDelay holds each message in DATA for a while before accepting
	// it, to widen the window between "the server has it" and "the
	// sender recorded it".
	DataDelay time.Duration
}

// ReceivedMail is one accepted message.
type ReceivedMail struct {
	MessageID string // without angle brackets
	To        string
	Subject   string
}

// StartSMTP listens on a free port until the test ends.
func StartSMTP(tb testing.TB) *SMTPServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return serveSMTP(tb, ln)
}

// StartSMTPS is StartSMTP speaking TLS from the first byte (smtps://),
// with a certificate of its own for 127.0.0.1; RootCAs trusts it.
func StartSMTPS(tb testing.TB) (s *SMTPServer, rootCAs *x509.CertPool) {
	tb.Helper()
	cert, pool := selfSigned(tb)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		tb.Fatal(err)
	}
	return serveSMTP(tb, ln), pool
}

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(tb testing.TB) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sekali test smtp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func serveSMTP(tb testing.TB, ln net.Listener) *SMTPServer {
	s := &SMTPServer{Addr: ln.Addr().String(), open: map[*smtp.Conn]bool{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.opened++
		s.open[c] = true
		return &smtpSession{server: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ErrorLog = log.New(io.Discard, "", 0) // clients killed mid-session are the point of some tests
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return s
}

// URL is the server's smtp:// URL.
func (s *SMTPServer) URL() string { return "smtp://" + s.Addr }

// Messages returns what was accepted so far.
func (s *SMTPServer) Messages() []ReceivedMail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ReceivedMail(nil), s.messages...)
}

// Sessions returns how many sessions clients have opened so far, and how
// many of them are open now. (A STARTTLS ends the session it upgrades and
// its EHLO opens another: a client that uses it counts two.)
func (s *SMTPServer) Sessions() (opened, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened, len(s.open)
}

// EndSessions closes every open session from the server's side, as a
// server does with a session idle for too long.
func (s *SMTPServer) EndSessions() {
	s.mu.Lock()
	conns := make([]*smtp.Conn, 0, len(s.open))
	for c := range s.open {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// RefuseRecipient has RCPT refuse to with 550, as a server does with a
// mailbox it does not have.
func (s *SMTPServer) RefuseRecipient(to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = to
}

type smtpSession struct {
	server *SMTPServer
	conn   *smtp.Conn
	to     string
}

// AuthMechanisms and Auth accept any PLAIN credentials (the AUTH
// extension), so that senders configured with a user and password work.
func (*smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (*smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, _, _ string) error { return nil }), nil
}

func (*smtpSession) Reset() {}
func (s *smtpSession) Logout() error {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	delete(s.server.open, s.conn)
	return nil
}
func (*smtpSession) Mail(string, *smtp.MailOptions) error { return nil }

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	if to == s.server.refused {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}
	s.to = to
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	br := bufio.NewReader(r)
	h, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		return err
	}
	io.Copy(io.Discard, br)
	time.Sleep(s.server.DataDelay) // simulates a slow server, on purpose
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	s.server.messages = append(s.server.messages, ReceivedMail{
		MessageID: strings.Trim(h.Get("Message-Id"), "<>"),
		To:        s.to,
		Subject:   h.Get("Subject"),
	})
	return nil
}
