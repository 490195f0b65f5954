package testenv

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// SMTPServer is a real SMTP listener of the test's own that keeps what it
// receives, so tests can count messages and Message-IDs.
type SMTPServer struct {
	Addr string

	mu       sync.Mutex
	messages []ReceivedMail
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
	s := &SMTPServer{Addr: ln.Addr().String()}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{server: s}, nil }))
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

type smtpSession struct {
	server *SMTPServer
	to     string
}

func (*smtpSession) Reset()                                      {}
func (*smtpSession) Logout() error                               { return nil }
func (*smtpSession) Mail(string, *smtp.MailOptions) error        { return nil }
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error { s.to = to; return nil }

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
