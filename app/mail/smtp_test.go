package mail_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/testenv"
)

var message = mail.Message{MessageID: "abc@sekali.local", From: "Sekali <shop@example.com>", To: "buyer@example.com", Subject: "Hello"}

// smtps:// speaks TLS from the first byte and checks the server's
// certificate; credentials go only over TLS.
func TestSendOverImplicitTLS(t *testing.T) {
	t.Parallel()
	srv, roots := testenv.StartSMTPS(t)
	s, err := mail.NewSMTP("smtps://shop:secret@" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	s.TLS.RootCAs = roots
	if err := s.Send(context.Background(), message); err != nil {
		t.Fatalf("send over smtps: %v", err)
	}
	if got := srv.Messages(); len(got) != 1 || got[0].MessageID != message.MessageID {
		t.Fatalf("server got %+v", got)
	}
	// A certificate the client does not trust stops the send before any
	// credential is sent.
	untrusting, _ := mail.NewSMTP("smtps://shop:secret@" + srv.Addr)
	untrusting.TLS.RootCAs = x509.NewCertPool()
	if err := untrusting.Send(context.Background(), message); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("send to an untrusted server: %v, want a TLS error", err)
	}
	if len(srv.Messages()) != 1 {
		t.Error("the untrusted send reached the server")
	}
}

func TestNewSMTPRefusesOtherSchemes(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://mail:25", "smtp+starttls://mail", "mail:25"} {
		if _, err := mail.NewSMTP(u); err == nil {
			t.Errorf("NewSMTP(%q) accepted", u)
		}
	}
	if _, err := mail.NewSMTP("smtp://plain.example"); err != nil {
		t.Errorf("smtp://: %v", err)
	}
}

// messageN is message with a Message-ID of its own.
func messageN(n int) mail.Message {
	m := message
	m.MessageID = fmt.Sprintf("m%d@sekali.local", n)
	return m
}

// startSender starts an SMTP server for the test and a sender to it,
// whose kept sessions are closed before the server stops.
func startSender(t *testing.T) (*testenv.SMTPServer, *mail.SMTP) {
	t.Helper()
	srv := testenv.StartSMTP(t)
	s, err := mail.NewSMTP(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return srv, s
}

// A session stays open after its message: three messages one after
// another go over one session, and Close ends it with QUIT.
func TestSendKeepsTheSessionOpen(t *testing.T) {
	t.Parallel()
	srv, s := startSender(t)
	for i := range 3 {
		if err := s.Send(context.Background(), messageN(i)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if got := len(srv.Messages()); got != 3 {
		t.Fatalf("server took %d messages, want 3", got)
	}
	if opened, _ := srv.Sessions(); opened != 1 {
		t.Errorf("%d sessions for three messages, want 1", opened)
	}
	s.Close()
	testenv.Eventually(t, "the kept session ended", func() bool { _, open := srv.Sessions(); return open == 0 })
}

// A server that ended a kept session (idle too long, or a limit of
// messages per session) refuses its next MAIL: nothing of the message was
// sent, so it goes over a new session, once.
func TestSendAfterTheServerEndedTheSession(t *testing.T) {
	t.Parallel()
	srv, s := startSender(t)
	if err := s.Send(context.Background(), messageN(1)); err != nil {
		t.Fatal(err)
	}
	srv.EndSessions()
	testenv.Eventually(t, "the server ended the session", func() bool { _, open := srv.Sessions(); return open == 0 })
	if err := s.Send(context.Background(), messageN(2)); err != nil {
		t.Fatalf("send after the server ended the session: %v", err)
	}
	got := srv.Messages()
	if len(got) != 2 || got[0].MessageID != "m1@sekali.local" || got[1].MessageID != "m2@sekali.local" {
		t.Errorf("server took %+v, want m1 and m2 once each", got)
	}
	if opened, _ := srv.Sessions(); opened != 2 {
		t.Errorf("%d sessions, want 2", opened)
	}
}

// A session idle for IdleSessionFor is not used again: the next message
// opens a new one, and the old one is closed.
func TestSendAfterTheSessionWasIdleTooLong(t *testing.T) {
	t.Parallel()
	srv, s := startSender(t)
	var clock atomic.Int64 // nanoseconds added to the real time
	mail.SetClock(s, func() time.Time { return time.Now().Add(time.Duration(clock.Load())) })
	if err := s.Send(context.Background(), messageN(1)); err != nil {
		t.Fatal(err)
	}
	clock.Store(int64(mail.IdleSessionFor))
	if err := s.Send(context.Background(), messageN(2)); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Messages()); got != 2 {
		t.Fatalf("server took %d messages, want 2", got)
	}
	if opened, _ := srv.Sessions(); opened != 2 {
		t.Errorf("%d sessions, want 2: the idle one was used again", opened)
	}
	testenv.Eventually(t, "the idle session ended", func() bool { _, open := srv.Sessions(); return open == 1 })
}

// A message refused after MAIL (here at RCPT) has begun: it fails, and
// is not tried again on a new session; the session it failed on is not
// kept, and the next message opens a new one.
func TestSendRefusedOnAKeptSession(t *testing.T) {
	t.Parallel()
	srv, s := startSender(t)
	if err := s.Send(context.Background(), messageN(1)); err != nil {
		t.Fatal(err)
	}
	srv.RefuseRecipient("nobody@example.com")
	refused := messageN(2)
	refused.To = "nobody@example.com"
	if err := s.Send(context.Background(), refused); err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("send to a refused recipient: %v, want the server's 550", err)
	}
	if opened, _ := srv.Sessions(); opened != 1 {
		t.Errorf("%d sessions after the refusal, want 1: a begun message was tried again", opened)
	}
	if err := s.Send(context.Background(), messageN(3)); err != nil {
		t.Fatal(err)
	}
	if opened, _ := srv.Sessions(); opened != 2 {
		t.Errorf("%d sessions, want 2: the session of the refusal was kept", opened)
	}
	got := srv.Messages()
	if len(got) != 2 || got[0].MessageID != "m1@sekali.local" || got[1].MessageID != "m3@sekali.local" {
		t.Errorf("server took %+v, want m1 and m3", got)
	}
}

// Senders at once each get a session of their own, kept or new; every
// message arrives once, and at most MaxIdleSessions stay open after.
func TestSendFromManySendersAtOnce(t *testing.T) {
	t.Parallel()
	srv, s := startSender(t)
	const senders, each = 16, 3
	start := make(chan struct{})
	errs := make(chan error, senders*each)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				errs <- s.Send(context.Background(), messageN(g*each+i))
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for _, m := range srv.Messages() {
		seen[m.MessageID]++
	}
	if len(seen) != senders*each {
		t.Errorf("%d distinct messages, want %d", len(seen), senders*each)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s arrived %d times", id, n)
		}
	}
	opened, _ := srv.Sessions()
	if opened > senders*each {
		t.Errorf("%d sessions for %d messages", opened, senders*each)
	}
	testenv.Eventually(t, "at most MaxIdleSessions kept", func() bool { _, open := srv.Sessions(); return open <= mail.MaxIdleSessions })
}
