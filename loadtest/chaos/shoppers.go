package main

// Customers who press Pay, and admins who refund them. During a round's
// storm customers arrive at -pay-rate a second: each orders one unit,
// presses Pay -presses times at once on both web processes (a customer
// with two tabs, and a double click), presses again until a page opens,
// then pays — the gateway's payment_intent.succeeded, signed as Stripe
// signs it, delivered to both web processes until one answers 2xx, as a
// gateway retries — and an admin refunds two orders in three: two
// refunds of all that is left asked at once under different keys (one
// must be taken, the other refused: 422), one of them sent twice; or
// half first, sent twice, then, once the gateway has answered it, the
// rest, again twice at once under different keys. What the storm's end cuts short is finished when the
// round settles, and then judged.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// shopper is one customer's order and what was done with it.
type shopper struct {
	id, token string
	total     int64
	currency  string
	pi, event string // the payment's PaymentIntent and its notification's event id

	mu      sync.Mutex
	page    bool // a press answered with the page
	refused bool // a press answered that the gateway refused the page: nothing to pay
	paid    bool
	refunds [][]*refundAsk // asked group after group
}

// refundAsk is one refund request, under one Idempotency-Key, sent
// copies times at once; every answer must be the same.
type refundAsk struct {
	key     string
	amount  string // major units; "" for all that is left
	copies  int
	answers []refundAnswer // the definite ones
}

type refundAnswer struct {
	status int
	id     int64  // the refund record, with 202
	code   string // the problem's code, otherwise
	detail string
}

// shop is one round's customers.
type shop struct {
	w        *world
	presses  atomic.Int64
	mu       sync.Mutex
	shoppers []*shopper
	wg       sync.WaitGroup
}

func (w *world) newShop() *shop { return &shop{w: w} }

// arrive sends a customer every 1/rate until deadline, each going as far
// as it can before it; run waits for them.
func (s *shop) run(ctx context.Context, deadline time.Time) {
	if s.w.opts.PayRate <= 0 {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(time.Second / time.Duration(s.w.opts.PayRate))
	defer tick.Stop()
	for time.Until(deadline) > time.Second {
		s.wg.Go(func() {
			if o := s.w.newOrder(ctx); o != nil {
				s.mu.Lock()
				s.shoppers = append(s.shoppers, o)
				s.mu.Unlock()
				s.w.follow(ctx, s, o)
			}
		})
		select {
		case <-ctx.Done():
		case <-tick.C: // the arrival rate
		}
	}
	s.wg.Wait()
}

// settle finishes what every customer and admin began, until deadline.
func (s *shop) settle(ctx context.Context, deadline time.Time) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	s.mu.Lock()
	all := append([]*shopper(nil), s.shoppers...)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, o := range all {
		wg.Go(func() { s.w.follow(ctx, s, o) })
	}
	wg.Wait()
}

// follow takes an order through what is left of its way: a page, the
// payment, the refunds.
func (w *world) follow(ctx context.Context, s *shop, o *shopper) {
	if !w.openPage(ctx, s, o) || !w.pay(ctx, o) {
		return
	}
	o.mu.Lock()
	if o.refunds == nil {
		o.refunds = w.refundPlan(o)
	}
	groups := o.refunds
	o.mu.Unlock()
	for i, g := range groups {
		if i > 0 && !w.refundsAnswered(ctx, o) {
			return
		}
		if !w.askRefunds(ctx, o, g) {
			return // the next group waits until this one is answered
		}
	}
}

// refundsAnswered waits until the gateway has answered every refund
// asked of o (none is planned or sent), as an admin who refunds the rest
// once the first refund shows done; false when ctx ends first.
//
// Asked sooner, the rest may be refused: a refund the gateway made and
// notified (charge.refunded, applied to the payment) while its answer is
// lost is counted twice — refunded, and still asked — until its answer
// comes, and Sekali answers that nothing is left (422).
func (w *world) refundsAnswered(ctx context.Context, o *shopper) bool {
	for {
		var open int
		err := w.db.QueryRow(ctx, "SELECT count(*) FROM gateway_requests WHERE order_id = $1 AND kind = 'refund' AND phase IN ('planned', 'sent')",
			o.id).Scan(&open)
		if err == nil && open == 0 {
			return true
		}
		w.hurryRefunds(ctx)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond): // polling a condition
		}
	}
}

// refundPlan is what an admin asks of a paid order: nothing (one order
// in three), the whole twice at once, or half and then the rest. Each
// group is one race: one ask in it takes the money, the others are
// refused.
func (w *world) refundPlan(o *shopper) [][]*refundAsk {
	if w.refundsOff() != "" {
		return [][]*refundAsk{}
	}
	key := func(what string) string { return fmt.Sprintf("chaos-%s-%s-%s", o.id, what, randomHex(3)) }
	switch rand.IntN(3) {
	case 0:
		return [][]*refundAsk{{{key: key("all"), copies: 2}, {key: key("all"), copies: 1}}}
	case 1:
		half := payments.MajorText(o.total/2, o.currency, 0)
		return [][]*refundAsk{{{key: key("half"), amount: half, copies: 2}}, {{key: key("rest"), copies: 1}, {key: key("rest"), copies: 2}}}
	}
	return [][]*refundAsk{}
}

// publicURL is every process's PUBLIC_URL. It matters: Pay's return
// URL, which is part of the Checkout Session Sekali asks for, is made
// from it, and a press after a lost answer must ask for the same session
// as the first, whichever web process it reaches under whichever host —
// the gateway refuses a key used with other parameters (Sekali would
// then ask again under a new key: a second session). Requests go to each
// process under its own address.
const publicURL = "https://shop.chaos.test"

// call sends a JSON request to a web process and returns its status and
// body; 0 and an error when no answer came.
func (w *world) call(ctx context.Context, method, url string, header http.Header, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// again waits before the next try of a call that got no definite
// answer, as a client backs off; false when ctx ended.
func again(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(200+rand.IntN(300)) * time.Millisecond): // a client's back-off, not a synchronisation
		return true
	}
}

// web is one of the web processes, at random.
func (w *world) web() string { return w.webURLs[rand.IntN(len(w.webURLs))] }

// createProduct makes the product the customers order.
func (w *world) createProduct(ctx context.Context) error {
	w.sku = "CHAOS-PAY-" + strings.ToUpper(randomHex(4))
	status, body, err := w.call(ctx, "POST", w.webURLs[0]+"/api/products", http.Header{"Authorization": {"Bearer " + w.token}},
		map[string]any{"sku": w.sku, "name": "chaos pay", "price": 15000, "currency": "IDR", "stock": 1_000_000})
	if err == nil && status != http.StatusCreated {
		err = fmt.Errorf("HTTP %d %s", status, body)
	}
	if err != nil {
		return fmt.Errorf("create the customers' product: %w", err)
	}
	return nil
}

// newOrder orders one unit, under one Idempotency-Key until it is
// created; nil when ctx ends first.
func (w *world) newOrder(ctx context.Context) *shopper {
	key := "chaos-order-" + randomHex(8)
	for {
		status, body, err := w.call(ctx, "POST", w.web()+"/api/orders", http.Header{"Idempotency-Key": {key}},
			map[string]any{"customer_email": "customer@example.com", "items": []map[string]any{{"sku": w.sku, "qty": 1}}})
		if err == nil && status == http.StatusCreated {
			var o struct {
				ID          string `json:"id"`
				Currency    string `json:"currency"`
				TotalAmount int64  `json:"total_amount"`
				AccessToken string `json:"access_token"`
			}
			if err := json.Unmarshal(body, &o); err != nil || o.AccessToken == "" {
				return nil
			}
			return &shopper{id: o.ID, token: o.AccessToken, total: o.TotalAmount, currency: o.Currency,
				pi: "pi_chaos_" + randomHex(8), event: "evt_chaos_" + randomHex(8)}
		}
		if !again(ctx) {
			return nil
		}
	}
}

// openPage presses Pay: -presses times at once, alternating between the
// web processes, then once at a time until a press answers with the page
// (or that the gateway refused it). It reports whether there is a page.
func (w *world) openPage(ctx context.Context, s *shop, o *shopper) bool {
	state := func() (page, refused bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.page, o.refused
	}
	press := func(target string) {
		s.presses.Add(1)
		status, _, err := w.call(ctx, "POST", target+"/api/orders/"+o.id+"/payment", http.Header{"Authorization": {"Bearer " + o.token}}, nil)
		o.mu.Lock()
		defer o.mu.Unlock()
		switch {
		case err != nil:
		case status == http.StatusOK:
			o.page = true
		case status == http.StatusConflict: // the gateway said no, or the order is no longer pending
			o.refused = true
		}
	}
	if page, refused := state(); page || refused {
		return page
	}
	var wg sync.WaitGroup
	for i := range max(w.opts.Presses, 1) {
		wg.Go(func() { press(w.webURLs[i%len(w.webURLs)]) })
	}
	wg.Wait()
	for {
		if page, refused := state(); page || refused || !again(ctx) {
			return page
		}
		press(w.web())
	}
}

// pay delivers the payment's notification, two copies at once to the two
// web processes, each again until it is answered 2xx; it reports whether
// the order is paid by it.
func (w *world) pay(ctx context.Context, o *shopper) bool {
	o.mu.Lock()
	paid := o.paid
	o.mu.Unlock()
	if paid {
		return true
	}
	f := payments.Fact{EventID: o.event, OrderID: o.id, TransactionID: o.pi, Status: models.EventPaid, Amount: o.total, Currency: o.currency}
	var wg sync.WaitGroup
	for _, target := range w.webURLs {
		wg.Go(func() {
			for {
				header, body, err := payments.Notification(w.stripe.send, f, time.Now())
				if err != nil {
					return
				}
				req, err := http.NewRequestWithContext(ctx, "POST", target+"/callbacks/stripe", bytes.NewReader(body))
				if err != nil {
					return
				}
				req.Header = header
				if res, err := w.client.Do(req); err == nil {
					var answer struct {
						Result string `json:"result"`
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					json.Unmarshal(b, &answer)
					if res.StatusCode/100 == 2 {
						if answer.Result == "processed" || answer.Result == "duplicate" {
							o.mu.Lock()
							o.paid = true
							o.mu.Unlock()
						}
						return
					}
				}
				if !again(ctx) {
					return
				}
			}
		})
	}
	wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.paid
}

// askRefunds sends the asks of one group that have not all their
// answers yet, every copy at once, each again until its answer is
// definite (not an error, a 5xx, or a key still in progress). It reports
// whether the group is answered.
func (w *world) askRefunds(ctx context.Context, o *shopper, g []*refundAsk) bool {
	var wg sync.WaitGroup
	n := 0
	for _, a := range g {
		o.mu.Lock()
		missing := a.copies - len(a.answers)
		o.mu.Unlock()
		for range missing {
			target := w.webURLs[n%len(w.webURLs)]
			n++
			wg.Go(func() {
				if ans, ok := w.askRefund(ctx, target, o.id, a); ok {
					o.mu.Lock()
					a.answers = append(a.answers, ans)
					o.mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range g {
		if len(a.answers) < a.copies {
			return false
		}
		for _, ans := range a.answers {
			if ans.status == http.StatusConflict && strings.Contains(ans.detail, "cannot ask for refunds") {
				w.turnRefundsOff(ans.detail)
			}
		}
	}
	return true
}

// askRefund is one copy of an ask, sent until its answer is definite.
func (w *world) askRefund(ctx context.Context, target, orderID string, a *refundAsk) (refundAnswer, bool) {
	body := map[string]any{"reason": "chaos: the customer asked"}
	if a.amount != "" {
		body["amount"] = json.Number(a.amount)
	}
	header := http.Header{"Authorization": {"Bearer " + w.token}, "Idempotency-Key": {a.key}}
	for {
		status, b, err := w.call(ctx, "POST", target+"/api/admin/orders/"+orderID+"/refunds", header, body)
		var v struct {
			ID     int64  `json:"id"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		json.Unmarshal(b, &v)
		retry := err != nil || status/100 == 5 || status == http.StatusTooManyRequests || v.Code == models.ERequestInProgress
		if !retry {
			return refundAnswer{status: status, id: v.ID, code: v.Code, detail: v.Detail}, true
		}
		if !again(ctx) {
			return refundAnswer{}, false
		}
	}
}

// judgeRefunds checks the answers: each key answered alike by all its
// copies, and in each group exactly one ask taken (202), the others
// refused (422, or refundedInFull). Groups still unanswered after the
// settling time are problems too. It returns the problems, and the asks
// taken and refused.
func (s *shop) judgeRefunds() (problems []string, taken, refused int) {
	s.mu.Lock()
	all := append([]*shopper(nil), s.shoppers...)
	s.mu.Unlock()
	for _, o := range all {
		o.mu.Lock()
		for gi, g := range o.refunds {
			if !refundsTaken(g) {
				continue // Sekali cannot ask for refunds: nothing to judge
			}
			var won []string
			answered := true
			for _, a := range g {
				if len(a.answers) < a.copies {
					answered = false
					continue
				}
				first := a.answers[0]
				for _, ans := range a.answers[1:] {
					if ans.status != first.status || ans.id != first.id {
						problems = append(problems, fmt.Sprintf("refund key %s of order %s answered %d (record %d), then %d (record %d)",
							a.key, o.id, first.status, first.id, ans.status, ans.id))
					}
				}
				switch {
				case first.status == http.StatusAccepted:
					won = append(won, a.key)
					taken++
				case first.status == http.StatusUnprocessableEntity, refundedInFull(first):
					refused++
				default:
					problems = append(problems, fmt.Sprintf("refund key %s of order %s answered %d %s: %s", a.key, o.id, first.status, first.code, first.detail))
				}
			}
			switch {
			case !answered:
				problems = append(problems, fmt.Sprintf("refunds of order %s (group %d) have no definite answer after the settling time", o.id, gi+1))
			case len(won) != 1:
				var said []string
				for _, a := range g {
					if len(a.answers) > 0 {
						said = append(said, fmt.Sprintf("%s: %d %s", a.key, a.answers[0].status, a.answers[0].detail))
					}
				}
				problems = append(problems, fmt.Sprintf("refunds of order %s asked at once (group %d): %d taken, want exactly one (%s)",
					o.id, gi+1, len(won), strings.Join(said, "; ")))
			}
		}
		o.mu.Unlock()
	}
	return problems, taken, refused
}

// refundedInFull is the other refusal of an ask that lost its race:
// once the refund that took all that was left is answered by the
// gateway, the order is refunded, and an ask then is refused as a
// transition the order cannot make (409), no longer as more than what
// is left (422).
func refundedInFull(a refundAnswer) bool {
	return a.status == http.StatusConflict && a.code == models.EInvalidTransition && strings.Contains(a.detail, " is refunded:")
}

// refundsTaken reports whether a group should have had a winner: it was
// not refused as a whole because Sekali cannot ask for refunds.
func refundsTaken(g []*refundAsk) bool {
	for _, a := range g {
		for _, ans := range a.answers {
			if strings.Contains(ans.detail, "cannot ask for refunds") {
				return false
			}
		}
	}
	return true
}

func (s *shop) counts() (orders, pages, paid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.shoppers {
		o.mu.Lock()
		orders++
		if o.page {
			pages++
		}
		if o.paid {
			paid++
		}
		o.mu.Unlock()
	}
	return orders, pages, paid
}

// refundsOff is why Sekali cannot ask Stripe for refunds, once it said
// so; "" while it can.
func (w *world) refundsOff() string {
	w.offMu.Lock()
	defer w.offMu.Unlock()
	return w.noRefunds
}

func (w *world) turnRefundsOff(why string) {
	w.offMu.Lock()
	defer w.offMu.Unlock()
	if w.noRefunds == "" {
		w.noRefunds = why
		w.say("refunds are off for the rest of the run: Sekali said %q", why)
	}
}
