package midtrans

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Sender writes Midtrans's notifications, signed with a server key: the
// sign command, the replayer, the sandbox page and the tests speak the
// format through it; the Provider never does.
type Sender struct{ serverKey string }

// NewSender returns the sender for the server key.
func NewSender(serverKey string) (payments.Sender, error) {
	if err := CheckServerKey(serverKey); err != nil {
		return nil, err
	}
	return Sender{serverKey: serverKey}, nil
}

// Provider implements payments.Sender.
func (Sender) Provider() string { return Name }

// statuses are the transaction_status and status_code Midtrans sends for
// each fact.
var statuses = map[models.PaymentEvent][2]string{
	models.EventPaid:     {"settlement", "200"},
	models.EventPending:  {"pending", "201"},
	models.EventDeclined: {"deny", "202"},
	models.EventFailed:   {"cancel", "202"},
	models.EventExpired:  {"expire", "407"},
	models.EventRefunded: {"refund", "200"},
}

// Key is the key Sekali derives from the Midtrans notification of f,
// which carries no event id: transaction_id:transaction_status, and for
// a refund its cumulative refund_amount.
func Key(f payments.Fact) string {
	if f.Status != models.EventRefunded {
		return f.TransactionID + ":" + statuses[f.Status][0]
	}
	n := refundNotification(f)
	return f.TransactionID + ":" + n.TransactionStatus + ":" + n.RefundAmount
}

// Key implements the sandbox gateway's naming of its deliveries: a
// Midtrans notification carries no event id, so its key (Key) names it.
func (Sender) Key(f payments.Fact) string { return Key(f) }

// refundNotification is the refund part of f's notification: one refund
// of f.Amount, or, when f restates the charge (Gross, Refunds), what
// Midtrans writes — gross_amount the charge's, refunds every refund so
// far, refund_amount their total, and partial_refund until they reach
// the gross amount. None is confirmed by the bank yet.
func refundNotification(f payments.Fact) Notification {
	refunds := f.Refunds
	if len(refunds) == 0 {
		key := f.RefundID
		if key == "" {
			key = "refund-" + f.TransactionID
		}
		refunds = []payments.Refund{{Key: key, Amount: f.Amount}}
	}
	n := Notification{TransactionStatus: "refund", GrossAmount: payments.MajorText(f.Amount, f.Currency, 2)}
	var total int64
	for _, r := range refunds {
		n.Refunds = append(n.Refunds, NotifiedRefund{RefundAmount: payments.MajorText(r.Amount, f.Currency, 2), RefundKey: r.Key})
		total += r.Amount
	}
	n.RefundAmount = payments.MajorText(total, f.Currency, 2)
	if f.Gross > 0 {
		n.GrossAmount = payments.MajorText(f.Gross, f.Currency, 2)
		if total < f.Gross {
			n.TransactionStatus = "partial_refund"
		}
	}
	return n
}

// Body implements payments.Sender.
func (Sender) Body(f payments.Fact) ([]byte, error) {
	st, ok := statuses[f.Status]
	if !ok {
		return nil, fmt.Errorf("midtrans %s: %w", f.Status, payments.ErrNotExpressible)
	}
	n := Notification{OrderID: f.OrderID, TransactionID: f.TransactionID,
		TransactionStatus: st[0], StatusCode: st[1], GrossAmount: payments.MajorText(f.Amount, f.Currency, 2),
		Currency: f.Currency, PaymentType: "bank_transfer"}
	if f.Status == models.EventRefunded {
		r := refundNotification(f)
		n.TransactionStatus, n.GrossAmount, n.RefundAmount, n.Refunds = r.TransactionStatus, r.GrossAmount, r.RefundAmount, r.Refunds
	}
	return json.Marshal(n)
}

// Sign implements payments.Sender: it sets the body's signature_key;
// Midtrans signs no header.
func (s Sender) Sign(body []byte, _ string, _ time.Time) (http.Header, []byte, error) {
	var fields map[string]any
	var n Notification
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers are written back as they came
	if err := dec.Decode(&fields); err != nil {
		return nil, nil, fmt.Errorf("not a Midtrans notification: %w", err)
	}
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, nil, fmt.Errorf("not a Midtrans notification: %w", err)
	}
	fields["signature_key"] = Signature(n, s.serverKey)
	signed, err := json.Marshal(fields)
	return http.Header{"Content-Type": {"application/json"}}, signed, err
}

// StatusAnswer is what Midtrans's status API answers about the
// transaction of a signed notification: the notification's fields, with
// the status API's status_message. The sandbox gateway answers so.
func StatusAnswer(notification []byte) ([]byte, error) {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(notification))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("not a Midtrans notification: %w", err)
	}
	fields["status_message"] = "Success, transaction is found"
	return json.Marshal(fields)
}

// Tell implements payments.Teller: the signed notification is PUT to the
// emulation's status API (Emulator), with the server key as the
// basic-auth user, which answers with it from then on. A pending one is
// not confirmed, so needs no telling.
func (s Sender) Tell(f payments.Fact, body []byte) (*http.Request, error) {
	if f.Status == models.EventPending {
		return nil, nil
	}
	_, signed, err := s.Sign(body, "", time.Time{})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPut, SandboxAPIPath+"/v2/"+url.PathEscape(f.TransactionID)+"/status", bytes.NewReader(signed))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(s.serverKey, "")
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// Authorizes reports whether r carries the server key as its basic-auth
// user, as a request to Midtrans's API does.
func (s Sender) Authorizes(r *http.Request) bool {
	user, _, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(user), []byte(s.serverKey)) == 1
}
