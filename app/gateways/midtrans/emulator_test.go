package midtrans_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// The Emulator, served by the sandbox gateway as Sekali's settings
// point at it, with the sandbox's fault switches.

const midtransKey = "SB-Mid-server-EMULATOR0123456789"

// midtransAPI is a small client of the emulation, as Sekali will call
// it: JSON, the server key as the basic-auth user.
type midtransAPI struct {
	t      *testing.T
	base   string // the sandbox's address
	key    string
	sender payments.Sender
}

// midtransEmulator serves a sandbox gateway that speaks Midtrans's
// format and emulates its API to midtransKey; its refund notifications
// find nobody (tried once).
func midtransEmulator(t *testing.T) (*sandboxgw.Sandbox, *midtrans.Emulator, midtransAPI) {
	t.Helper()
	sender, err := gateways.NewSender(midtrans.Name, midtransKey)
	if err != nil {
		t.Fatal(err)
	}
	g := sandboxgwtest.New(t, "")
	g.Speak(sender)
	em := midtrans.NewEmulator(midtransKey)
	g.Emulate(em)
	g.Retries = nil
	return g, em, midtransAPI{t: t, base: sandboxgwtest.Serve(t, g), key: midtransKey, sender: sender}
}

// call sends body to path (below midtrans.SandboxAPIPath) and decodes
// the answer; err is no answer, or not JSON. It may run on any goroutine.
func (m midtransAPI) call(ctx context.Context, method, path string, body []byte) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, m.base+midtrans.SandboxAPIPath+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(m.key, "")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var answer map[string]any
	if res.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
			return res.StatusCode, nil, fmt.Errorf("%s %s: %d, not JSON: %w", method, path, res.StatusCode, err)
		}
	}
	return res.StatusCode, answer, nil
}

// together posts body to path n times at once, and counts the answers
// by status (0: none).
func (m midtransAPI) together(n int, path string, body any) map[int]int {
	b, _ := json.Marshal(body)
	codes := make([]int, n)
	sandboxgwtest.AtOnce(n, func(i int) {
		codes[i], _, _ = m.call(m.t.Context(), http.MethodPost, path, b)
	})
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	return count
}

func (m midtransAPI) post(path string, body any) (int, map[string]any) {
	m.t.Helper()
	b, _ := json.Marshal(body)
	status, answer, err := m.call(m.t.Context(), http.MethodPost, path, b)
	if err != nil {
		m.t.Fatal(err)
	}
	return status, answer
}

// transaction makes the gateway know transaction tx of order as status,
// as the replayer does: a PUT of its signed notification.
func (m midtransAPI) transaction(order, tx string, status models.PaymentEvent, amount int64) {
	m.t.Helper()
	_, body, err := payments.Notification(m.sender, payments.Fact{EventID: "evt-" + tx, OrderID: order, TransactionID: tx,
		Status: status, Amount: amount, Currency: "IDR"}, time.Now())
	if err != nil {
		m.t.Fatal(err)
	}
	if code, _, err := m.call(m.t.Context(), http.MethodPut, "/v2/"+tx+"/status", body); err != nil || code != http.StatusNoContent {
		m.t.Fatalf("PUT status: %d, %v", code, err)
	}
}

// A tool that sends Midtrans notifications of its own (the replayer)
// tells the status API of each but a pending one, which Sekali does not
// confirm (Sender.Tell): a PUT of the signed notification with the
// server key, after which the status API answers with it. Another key
// tells nothing.
func TestMidtransSenderTellsTheStatusAPI(t *testing.T) {
	t.Parallel()
	_, _, m := midtransEmulator(t)
	settled := payments.Fact{OrderID: "ORD-MT-TELL", TransactionID: "tx-mt-tell", Status: models.EventPaid, Amount: 150000, Currency: "IDR"}
	stranger := sandboxgwtest.Must(gateways.NewSender(midtrans.Name, "SB-Mid-server-SOMEONEELSE0123"))
	if status := gatewaytest.Tell(t, m.base, stranger, settled); status != http.StatusUnauthorized {
		t.Errorf("told with another key: %d, want 401", status)
	}
	if status := gatewaytest.Tell(t, m.base, m.sender, payments.Fact{OrderID: "ORD-MT-TELL", TransactionID: "tx-mt-tell",
		Status: models.EventPending, Currency: "IDR"}); status != 0 {
		t.Errorf("a pending notification told: %d, want nothing to tell", status)
	}
	c, err := midtrans.NewStatusClient(midtransKey, m.base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Transaction(t.Context(), "tx-mt-tell"); found || err != nil {
		t.Fatalf("before it is told: found %v, %v; want unknown", found, err)
	}
	if status := gatewaytest.Tell(t, m.base, m.sender, settled); status != http.StatusNoContent {
		t.Fatalf("told with the key: %d, want 204", status)
	}
	if ev, found, err := c.Transaction(t.Context(), "tx-mt-tell"); !found || err != nil || ev.Status != models.EventPaid || ev.Amount != 150000 || ev.OrderID != "ORD-MT-TELL" {
		t.Errorf("after: %+v %v %v, want the settlement", ev, found, err)
	}
}

func snapBody(order string, amount int64) map[string]any {
	return map[string]any{
		"transaction_details": map[string]any{"order_id": order, "gross_amount": amount},
		"item_details":        []map[string]any{{"id": "SKU1", "price": amount, "quantity": 1, "name": "Kopi"}},
		"callbacks":           map[string]string{"finish": "https://shop.example/orders/" + order},
	}
}

// firstMessage is a Snap error's first message.
func firstMessage(answer map[string]any) string {
	msgs, _ := answer["error_messages"].([]any)
	if len(msgs) == 0 {
		return ""
	}
	s, _ := msgs[0].(string)
	return s
}

// A Snap order_id is single-use, as at Midtrans: the second create is
// refused, never answered with the first token; once the order is paid
// the refusal says so.
func TestMidtransSnapOrderIDOnce(t *testing.T) {
	t.Parallel()
	_, _, m := midtransEmulator(t)
	status, first := m.post("/snap/v1/transactions", snapBody("ORD-MT-1", 150000))
	token, _ := first["token"].(string)
	if status != http.StatusCreated || len(token) != 36 || first["redirect_url"] != m.base+"/sandbox/pay/ORD-MT-1?via=midtrans" {
		t.Fatalf("create: %d %v", status, first)
	}
	status, again := m.post("/snap/v1/transactions", snapBody("ORD-MT-1", 150000))
	if status != http.StatusBadRequest || firstMessage(again) != "transaction_details.order_id has already been taken" || again["token"] != nil {
		t.Errorf("the same order_id again: %d %v", status, again)
	}
	m.transaction("ORD-MT-1", "tx-mt-1", models.EventPaid, 150000)
	status, paid := m.post("/snap/v1/transactions", snapBody("ORD-MT-1", 150000))
	if status != http.StatusBadRequest || !strings.Contains(firstMessage(paid), "has been paid and utilized") {
		t.Errorf("a paid order_id again: %d %v", status, paid)
	}

	for name, c := range map[string]struct {
		body any
		want string
	}{
		"no order_id": {map[string]any{"transaction_details": map[string]any{"gross_amount": 1000}}, "transaction_details.order_id is required"},
		"items differ": {map[string]any{"transaction_details": map[string]any{"order_id": "ORD-MT-2", "gross_amount": 1000},
			"item_details": []map[string]any{{"price": 999, "quantity": 1}}}, "transaction_details.gross_amount is not equal to the sum of item_details"},
	} {
		if status, answer := m.post("/snap/v1/transactions", c.body); status != http.StatusBadRequest || firstMessage(answer) != c.want {
			t.Errorf("%s: %d %v", name, status, answer)
		}
	}
	stranger := m
	stranger.key = "SB-Mid-server-SOMEONEELSE012345"
	if status, answer := stranger.post("/snap/v1/transactions", snapBody("ORD-MT-3", 1000)); status != http.StatusUnauthorized ||
		!strings.HasPrefix(firstMessage(answer), "Access denied") {
		t.Errorf("another server key: %d %v", status, answer)
	}
	if status, _ := m.post("/snap/v1/transactions", snapBody("ORD-MT-2", 1000)); status != http.StatusCreated {
		t.Errorf("ORD-MT-2 after its refused creates: %d, want 201 (a refused create takes no order_id)", status)
	}
}

// Ten creates of one order_id at once: one token, nine refusals.
func TestMidtransSnapConcurrent(t *testing.T) {
	t.Parallel()
	_, _, m := midtransEmulator(t)
	if got := m.together(10, "/snap/v1/transactions", snapBody("ORD-MT-8", 1000)); got[http.StatusCreated] != 1 || got[http.StatusBadRequest] != 9 {
		t.Errorf("ten creates at once: %v, want one 201 and nine 400", got)
	}
}

// FailNext fails before acting: the retry creates. TimeOutAfterActing
// acts: the retry finds the order_id taken — what a lost Snap answer
// costs at Midtrans.
func TestMidtransSnapFaults(t *testing.T) {
	t.Parallel()
	g, _, m := midtransEmulator(t)
	g.Faults().FailNext(1)
	status, answer := m.post("/snap/v1/transactions", snapBody("ORD-MT-4", 1000))
	if status != http.StatusInternalServerError || !strings.HasPrefix(firstMessage(answer), "Sorry, we encountered internal server error") {
		t.Fatalf("FailNext: %d %v", status, answer)
	}
	if status, answer := m.post("/snap/v1/transactions", snapBody("ORD-MT-4", 1000)); status != http.StatusCreated {
		t.Fatalf("the retry: %d %v", status, answer)
	}

	g.Faults().TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(snapBody("ORD-MT-5", 1000))
		_, _, err := m.call(ctx, http.MethodPost, "/snap/v1/transactions", b)
		done <- err
	}()
	testenv.Eventually(t, "the gateway acted and holds the answer", func() bool { return g.Faults().Held() == 1 })
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the call was answered, want no answer")
	}
	status, answer = m.post("/snap/v1/transactions", snapBody("ORD-MT-5", 1000))
	if status != http.StatusBadRequest || firstMessage(answer) != "transaction_details.order_id has already been taken" {
		t.Errorf("the retry after no answer: %d %v", status, answer)
	}
}

// A refund_key is single-use: the second refund with it is 406
// "Duplicate refund ID", also when ten ask at once; refunds add up to
// the payment and no further.
func TestMidtransRefund(t *testing.T) {
	t.Parallel()
	g, _, m := midtransEmulator(t)
	m.transaction("ORD-MT-6", "tx-mt-6", models.EventPaid, 150000)
	refund := func(id, key string, amount int64) (int, map[string]any) {
		return m.post("/v2/"+id+"/refund", map[string]any{"refund_key": key, "amount": amount, "reason": "customer asked"})
	}

	if got := m.together(10, "/v2/ORD-MT-6/refund", map[string]any{"refund_key": "R-1", "amount": 50000}); got[http.StatusOK] != 1 ||
		got[http.StatusNotAcceptable] != 9 {
		t.Fatalf("ten refunds with one key at once: %v, want one 200 and nine 406", got)
	}
	status, answer := refund("tx-mt-6", "R-1", 50000)
	if status != http.StatusNotAcceptable || answer["status_code"] != "406" || answer["status_message"] != "Duplicate refund ID" {
		t.Errorf("the same refund_key again: %d %v", status, answer)
	}

	g.Faults().TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := m.call(ctx, http.MethodPost, "/v2/tx-mt-6/refund", []byte(`{"refund_key":"R-2","amount":40000}`))
		done <- err
	}()
	testenv.Eventually(t, "the gateway refunded and holds the answer", func() bool { return g.Faults().Held() == 1 })
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the refund was answered, want no answer")
	}
	if status, _ := refund("tx-mt-6", "R-2", 40000); status != http.StatusNotAcceptable {
		t.Errorf("R-2 retried after no answer: %d, want 406", status)
	}

	status, answer = refund("ORD-MT-6", "R-3", 60000) // 50000 + 40000 refunded: 60000 is all that is left
	if status != http.StatusOK || answer["status_code"] != "200" || answer["transaction_status"] != "refund" ||
		answer["refund_amount"] != "60000.00" || answer["refund_key"] != "R-3" || answer["order_id"] != "ORD-MT-6" ||
		answer["transaction_id"] != "tx-mt-6" || answer["gross_amount"] != "150000.00" || answer["refund_chargeback_id"] == nil {
		t.Errorf("the rest: %d %v", status, answer)
	}
	if status, answer := refund("ORD-MT-6", "R-4", 1); status != 414 || answer["status_code"] != "414" {
		t.Errorf("beyond the payment: %d %v", status, answer)
	}
	if status, _ := refund("tx-none", "R-5", 1); status != http.StatusNotFound {
		t.Errorf("an unknown transaction: %d, want 404", status)
	}
	m.transaction("ORD-MT-7", "tx-mt-7", models.EventPending, 1000)
	if status, _ := refund("tx-mt-7", "R-6", 1000); status != http.StatusPreconditionFailed {
		t.Errorf("a pending transaction: %d, want 412", status)
	}
	g.Faults().FailNext(1)
	if status, answer := refund("tx-mt-7", "R-7", 1000); status != http.StatusInternalServerError || answer["status_code"] != "500" {
		t.Errorf("FailNext: %d %v", status, answer)
	}
}

// A new refund is Midtrans's signed refund notification, which the
// status API then answers with (so Sekali's confirmation of it agrees);
// a later refund still refunds from the settled gross_amount. Each
// notification restates the transaction as Midtrans does: its
// gross_amount, every refund so far and their total — so two partial
// refunds of one amount are two facts with two keys, not a conflict.
func TestMidtransRefundNotifies(t *testing.T) {
	t.Parallel()
	c := sandboxgwtest.RecordCallbacks(t)
	sender, err := gateways.NewSender(midtrans.Name, midtransKey)
	if err != nil {
		t.Fatal(err)
	}
	g := sandboxgwtest.New(t, c.URL)
	g.Speak(sender)
	g.Emulate(midtrans.NewEmulator(midtransKey))
	g.Retries = nil
	m := midtransAPI{t: t, base: sandboxgwtest.Serve(t, g), key: midtransKey, sender: sender}
	m.transaction("ORD-MT-9", "tx-mt-9", models.EventPaid, 150000)
	if status, answer := m.post("/v2/tx-mt-9/refund", map[string]any{"refund_key": "ORD-MT-9-R1", "amount": 50000}); status != http.StatusOK {
		t.Fatalf("refund: %d %v", status, answer)
	}
	d := c.Wait(t, 1)[0]
	provider, err := midtrans.NewProvider(midtransKey, m.base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.Verify(d.Header, d.Body, time.Now()); err != nil || d.Provider != midtrans.Name {
		t.Fatalf("delivery to %s: %v", d.Provider, err)
	}
	ev, err := provider.Parse(d.Header, d.Body)
	if err != nil || ev.Status != models.EventRefunded || ev.TransactionID != "tx-mt-9" || ev.OrderID != "ORD-MT-9" ||
		!slices.Equal(ev.Refunds, []payments.Refund{{Key: "ORD-MT-9-R1", Amount: 50000, Status: models.RefundSucceeded}}) {
		t.Fatalf("notification %+v, %v", ev, err)
	}
	confirmed, found, err := provider.Confirm(t.Context(), ev)
	if err != nil || !found || !payments.SameEvent(ev, confirmed) {
		t.Errorf("the status API says %+v (%v, %v), want the notification's %+v", confirmed, found, err, ev)
	}
	var first midtrans.Notification
	if err := json.Unmarshal(d.Body, &first); err != nil || first.GrossAmount != "150000.00" || first.RefundAmount != "50000.00" ||
		first.TransactionStatus != "partial_refund" {
		t.Errorf("the first refund's notification: %s (%v); want gross 150000.00, refunded 50000.00, partial_refund", d.Body, err)
	}
	// The same amount again: another fact, under another key.
	if status, answer := m.post("/v2/tx-mt-9/refund", map[string]any{"refund_key": "ORD-MT-9-R2", "amount": 50000}); status != http.StatusOK {
		t.Fatalf("a second refund of 50000: %d %v", status, answer)
	}
	second, err := provider.Parse(c.Wait(t, 2)[1].Header, c.Wait(t, 2)[1].Body)
	if err != nil || second.Amount != 100000 || second.Key == ev.Key ||
		!slices.Equal(second.Refunds, []payments.Refund{{Key: "ORD-MT-9-R1", Amount: 50000, Status: models.RefundSucceeded},
			{Key: "ORD-MT-9-R2", Amount: 50000, Status: models.RefundSucceeded}}) {
		t.Errorf("the second refund's notification: %+v, %v; want both refunds, 100000 in all, a key of its own (not %q)", second, err, ev.Key)
	}
	status, answer := m.post("/v2/ORD-MT-9/refund", map[string]any{"refund_key": "ORD-MT-9-R3"})
	if status != http.StatusOK || answer["gross_amount"] != "150000.00" || answer["refund_amount"] != "50000.00" ||
		answer["transaction_status"] != "refund" {
		t.Errorf("the rest, after the notifications: %d %v", status, answer)
	}
	last, err := provider.Parse(c.Wait(t, 3)[2].Header, c.Wait(t, 3)[2].Body)
	if err != nil || last.Amount != 150000 || len(last.Refunds) != 3 || !strings.HasSuffix(last.Key, ":refund:150000.00") {
		t.Errorf("the last refund's notification: %+v, %v; want three refunds, 150000 in all, transaction_status refund", last, err)
	}
}

// A Snap order_id is single-use: the second page opened under one key is
// refused (400 "has already been taken"), also when the first answer was
// lost — the caller must try a new key.
func TestMidtransOpenerKeyOnce(t *testing.T) {
	t.Parallel()
	g, _, m := midtransEmulator(t)
	o, err := midtrans.NewPageOpener(midtransKey, m.base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	first, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-4", "ORD-OP-4-1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.ObjectID == "" || first.RedirectURL != m.base+"/sandbox/pay/ORD-OP-4-1?t=tok&via=midtrans" {
		t.Errorf("page %+v", first)
	}
	taken := func(err error) bool {
		var spent *gatewaycalls.KeySpent
		return errors.As(err, &spent) && spent.Message == "transaction_details.order_id has already been taken"
	}
	if _, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-4", "ORD-OP-4-1")); !taken(err) {
		t.Errorf("the same key again: %v, want the key spent", err)
	}

	err = sandboxgwtest.OpenLate(t, g, o, sandboxgwtest.PageOf("ORD-OP-5", "ORD-OP-5-1"))
	if err == nil || gatewaycalls.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer: %v, want the deadline", err)
	}
	if _, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-5", "ORD-OP-5-1")); !taken(err) {
		t.Errorf("the repeat after no answer: %v, want the key spent", err)
	}
	if _, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-5", "ORD-OP-5-2")); err != nil {
		t.Errorf("a new key: %v", err)
	}
}

// The emulated Snap page is on the address its API was asked at, and
// sends the customer back to the shop's return URL
// (sandboxgwtest.PageReturnsToTheShop); the order_id is a request key of
// the order (ORD-RET~1), as after a spent one.
func TestMidtransPageReturnsToTheShopsReturnURL(t *testing.T) {
	t.Parallel()
	sandboxgwtest.PageReturnsToTheShop(t, func(g *sandboxgw.Sandbox) {
		g.Speak(sandboxgwtest.Must(gateways.NewSender(midtrans.Name, midtransKey)))
		g.Emulate(midtrans.NewEmulator(midtransKey))
	}, func(base string) (gatewaycalls.PageOpener, error) {
		return midtrans.NewPageOpener(midtransKey, base+midtrans.SandboxAPIPath)
	}, "ORD-RET~1")
}

// The sandbox's QA panel speaking Midtrans's format sends a failure
// (cancel), also out of order, but not lost: the sandbox's status
// endpoint answers in its own format only.
func TestMidtransPlansOfTheQAPanel(t *testing.T) {
	t.Parallel()
	g, _, _ := midtransEmulator(t)
	if _, err := g.ParsePlan("failed", "2", "out_of_order", midtrans.Name); err != nil {
		t.Errorf("a Midtrans failure out of order: %v", err)
	}
	if _, err := g.ParsePlan("paid", "1", "lost", midtrans.Name); models.ErrorCode(err) != models.EInvalid {
		t.Errorf("lost in Midtrans's format: %v, want invalid_request", err)
	}
}
