package mail_test

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"

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
