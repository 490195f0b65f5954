package audit_test

// The reference model of the books: what each money operation does, in
// a few lines each, apart from the code it checks (it calls none of
// models' decisions). docs/state-machine.md says the same rules in
// words; TestStateMachineDocMatchesTheModel holds the page's tables to
// the model. The books test drives the real application and compares
// its rows with the model after every step.

import (
	"slices"
	"strconv"

	"github.com/sekali/sekali/models"
)

// model is the shop's books as they must be.
type model struct {
	orders   map[string]*mOrder
	ids      []string            // the orders in the order they were made
	charges  map[string]*mCharge // by provider + " " + reference
	stock    map[string]int64    // by SKU
	requests []*mRequest         // refunds asked of gateways, by id - 1
	keys     map[string]mCallback
	// tasks counts the outbox rows written, by task id, but those of the
	// refunds' emails (counted per order).
	tasks map[string]int
	// alerts are the refund.failed alerts raised, by refund request id.
	alerts map[int64]bool
	// approvalAbove is REFUND_APPROVAL_ABOVE's amount, in the orders'
	// one currency.
	approvalAbove int64
	// broken: the books no longer hold — a gateway answered that it made
	// a refund the books cannot take (more than is left: the gateway
	// knew less than Sekali did). Only an operator can put that right,
	// and the audit must say so until then.
	broken bool
}

// mOrder is an order: one unit of one product.
type mOrder struct {
	id, sku, gateway string
	total            int64
	status           models.OrderStatus
	charges          []*mCharge // in the order they were first told
	invoiced         bool
	emailed          bool // the order_paid email sent
	refundTasks      int  // refund_succeeded email tasks written
	refundEmails     int  // refund_succeeded emails sent
	// told are the refunds, by key, whose refund_succeeded email was sent.
	told         map[string]bool
	failedTasks  int    // refund_failed email tasks written
	failedEmails int    // refund_failed emails sent
	endEmail     string // the template of the email sent that told it ended: order_cancelled, order_expired
}

// mCharge is one charge of an order at its gateway.
type mCharge struct {
	provider, ref string
	order         *mOrder
	amount        int64
	status        models.PaymentStatus
	from          models.PaymentStatus // what a refunded charge returns to
	dispute       models.Dispute
	disputed      int64
	refunds       []*mRefund // the refunds the gateway named, in the order told
	// total is the highest refunded total the gateway stated of it: it
	// stands for refunds not named yet.
	total int64
}

// mRefund is one refund of a charge at its gateway, as named.
type mRefund struct {
	key    string
	amount int64
	state  models.RefundStatus
}

// mRequest is a refund Sekali asked of a gateway.
type mRequest struct {
	id     int64
	charge *mCharge
	key    string // Sekali's key, {order}-R{n}
	object string // the gateway's id of the refund, once done
	amount int64
	phase  models.GatewayPhase
}

// mCallback is what the first delivery of an event key did, and the
// last judgement of it (a rejected one is judged again).
type mCallback struct {
	fingerprint string
	rejected    bool
	reason      string // why it was rejected
	order       string // the order the event named
}

func newModel(approvalAbove int64) *model {
	return &model{orders: map[string]*mOrder{}, charges: map[string]*mCharge{}, stock: map[string]int64{},
		keys: map[string]mCallback{}, tasks: map[string]int{}, alerts: map[int64]bool{}, approvalAbove: approvalAbove}
}

// holds: an order in this state keeps its unit of stock.
func holds(s models.OrderStatus) bool {
	switch s {
	case models.OrderPending, models.OrderPaid, models.OrderPartiallyRefunded, models.OrderRefunded:
		return true
	}
	return false
}

// counts: a refund in this state counts as refunded.
func counts(s models.RefundStatus) bool {
	return s == models.RefundPending || s == models.RefundSucceeded
}

// taken: a charge in this state took the customer's money.
func taken(s models.PaymentStatus) bool {
	return s == models.PaymentSucceeded || s == models.PaymentRefundRequired || s == models.PaymentRefunded
}

// named is what c's named refunds that count add up to.
func (c *mCharge) named() int64 {
	var n int64
	for _, r := range c.refunds {
		if counts(r.state) {
			n += r.amount
		}
	}
	return n
}

// refunded is what counts as refunded of c: the named refunds that
// count, or the stated total less the named refunds that failed,
// whichever is more.
func (c *mCharge) refunded() int64 {
	var named, failed int64
	for _, r := range c.refunds {
		if counts(r.state) {
			named += r.amount
		} else if r.state == models.RefundFailed || r.state == models.RefundCanceled {
			failed += r.amount
		}
	}
	return max(named, c.total-failed)
}

func (c *mCharge) refund(key string) *mRefund {
	for _, r := range c.refunds {
		if r.key == key {
			return r
		}
	}
	return nil
}

// create is a new order of one unit of sku at total, paid through
// gateway; false when the product is out of stock (409).
func (m *model) create(id, sku, gateway string, total int64) bool {
	if m.stock[sku] < 1 {
		return false
	}
	m.stock[sku]--
	m.orders[id] = &mOrder{id: id, sku: sku, gateway: gateway, total: total, status: models.OrderPending, told: map[string]bool{}}
	m.ids = append(m.ids, id)
	m.tasks["order:expire:"+id]++
	return true
}

// end moves a pending order to status, giving its stock back; a
// customer whose order was cancelled or expired is to be told.
func (m *model) end(o *mOrder, status models.OrderStatus) {
	o.status = status
	m.stock[o.sku]++
	switch status {
	case models.OrderCancelled:
		m.tasks["email:send:order_cancelled:"+o.id]++
	case models.OrderExpired:
		m.tasks["email:send:order_expired:"+o.id]++
	}
}

// cancel is the customer's cancel: the answer's status.
func (m *model) cancel(o *mOrder) int {
	switch o.status {
	case models.OrderPending:
		m.end(o, models.OrderCancelled)
	case models.OrderCancelled:
	default:
		return 409
	}
	return 200
}

// expire is the order:expire job.
func (m *model) expire(o *mOrder) {
	if o.status == models.OrderPending {
		m.end(o, models.OrderExpired)
	}
}

// wasPaid: an order in this state was paid, refunded since or not.
func wasPaid(s models.OrderStatus) bool {
	return s == models.OrderPaid || s == models.OrderPartiallyRefunded || s == models.OrderRefunded
}

// invoice is o's invoice job run now: a sale's paperwork is owed once it
// was paid.
func (m *model) invoice(o *mOrder) { o.invoiced = o.invoiced || wasPaid(o.status) }

// email is o's email job of template run now (about refund r, for a
// refund's): it sends what is true as it runs, and nothing else.
func (m *model) email(o *mOrder, template string, r *mRefund) {
	switch {
	case template == "order_paid":
		o.emailed = o.emailed || wasPaid(o.status)
	case template == "refund_succeeded" && r != nil && r.state == models.RefundSucceeded:
		o.refundEmails++
		o.told[r.key] = true
	// A refund's failure is told only to a customer who was told of the
	// refund.
	case template == "refund_failed" && r != nil && (r.state == models.RefundFailed || r.state == models.RefundCanceled) && o.told[r.key]:
		o.failedEmails++
	// An order a late payment took back is no longer cancelled or expired.
	case template == "order_cancelled" && o.status == models.OrderCancelled,
		template == "order_expired" && o.status == models.OrderExpired:
		o.endEmail = template
	}
}

// maxTotal is the bound of an order's total, in minor units.
const maxTotal = 1_000_000_000_000_000

// correct is an owner's correction of o's total to amount, with a reason
// (reasoned: not blank): the answer's status. Only a total a payment was
// refused for can be wrong: o is not paid yet (pending, or failed,
// expired or cancelled, whose late payment is weighed against the total
// too), and one of its payments was last judged rejected for its amount.
// It changes the total only: the next judgement of that payment weighs
// it against the new one.
func (m *model) correct(o *mOrder, amount int64, reasoned bool) int {
	switch {
	case amount < 1 || amount > maxTotal || !reasoned:
		return 422
	case o.status != models.OrderPending && o.status != models.OrderFailed && o.status != models.OrderExpired && o.status != models.OrderCancelled:
		return 409
	case !m.refusedForAmount(o):
		return 409
	}
	o.total = amount
	return 303
}

// refusedForAmount: a payment of o stands rejected for its amount — a
// key whose last judgement was that, and not judged otherwise since.
func (m *model) refusedForAmount(o *mOrder) bool {
	for _, cb := range m.keys {
		if cb.rejected && cb.reason == models.ReasonAmountMismatch && cb.order == o.id {
			return true
		}
	}
	return false
}

// event is a notification as Sekali reads it.
type event struct {
	provider, key, fingerprint string
	order, ref                 string
	status                     models.PaymentEvent
	amount                     int64
	currency                   string
	refunds                    []mRefund
}

// outcome is what Sekali answers a notification: its HTTP status and
// result (and a rejection's reason).
type outcome struct {
	status         int
	result, reason string
}

var (
	processed = outcome{200, models.ResultProcessed, ""}
	stale     = outcome{200, models.ResultStale, ""}
	duplicate = outcome{200, models.ResultDuplicate, ""}
)

func rejected(reason string) outcome { return outcome{422, models.ResultRejected, reason} }

// deliver is a notification's effect on the books.
func (m *model) deliver(e event) outcome {
	// A key told before is a duplicate, or with another body a conflict;
	// one that was rejected is judged again when the same fact comes back.
	if seen, ok := m.keys[e.provider+" "+e.key]; ok {
		switch {
		case seen.fingerprint != e.fingerprint:
			return outcome{409, models.ResultConflict, ""}
		case !seen.rejected:
			return duplicate
		}
	}
	out := m.apply(e)
	m.keys[e.provider+" "+e.key] = mCallback{fingerprint: e.fingerprint, rejected: out.result == models.ResultRejected,
		reason: out.reason, order: e.order}
	return out
}

func (m *model) apply(e event) outcome {
	c := m.charges[e.provider+" "+e.ref]
	o := m.orders[e.order]
	if o == nil && c != nil && e.order == "" { // a dispute names its charge only
		o = c.order
	}
	switch {
	case o == nil:
		return rejected(models.ReasonUnknownOrder)
	case c != nil && c.order != o:
		return rejected(models.ReasonReferenceMismatch)
	}
	switch e.status {
	case models.EventRefunded:
		return m.refundNews(o, c, e)
	case models.EventDisputed, models.EventDisputeWon, models.EventDisputeLost:
		return m.disputeNews(c, e)
	}
	if o.status == models.OrderPending {
		return m.pendingNews(o, c, e)
	}
	if e.status != models.EventPaid || c != nil && taken(c.status) {
		return stale
	}
	if e.currency != "IDR" {
		return rejected(models.ReasonCurrencyMismatch)
	}
	switch o.status {
	case models.OrderFailed, models.OrderExpired, models.OrderCancelled: // a late payment
		if e.amount != o.total {
			return rejected(models.ReasonAmountMismatch)
		}
		if m.stock[o.sku] < 1 {
			o.status = models.OrderRefundRequired
			m.setCharge(o, c, e, models.PaymentRefundRequired)
			return processed
		}
		m.stock[o.sku]--
		m.pay(o, c, e)
		return processed
	}
	m.setCharge(o, c, e, models.PaymentRefundRequired) // a second charge: it goes back
	return processed
}

// pendingNews is a payment's news on a pending order.
func (m *model) pendingNews(o *mOrder, c *mCharge, e event) outcome {
	switch e.status {
	case models.EventPaid:
		switch {
		case e.currency != "IDR":
			return rejected(models.ReasonCurrencyMismatch)
		case e.amount != o.total:
			return rejected(models.ReasonAmountMismatch)
		}
		m.pay(o, c, e)
	case models.EventDeclined:
		m.setCharge(o, c, e, models.PaymentFailed)
	case models.EventFailed:
		m.end(o, models.OrderFailed)
		m.setCharge(o, c, e, models.PaymentFailed)
	case models.EventExpired:
		m.end(o, models.OrderExpired)
		m.setCharge(o, c, e, models.PaymentExpired)
	case models.EventPending:
		if c == nil {
			m.setCharge(o, c, e, models.PaymentPending)
		}
	default:
		return stale
	}
	return processed
}

// pay pays o with the event's charge: its invoice and its email follow.
func (m *model) pay(o *mOrder, c *mCharge, e event) {
	o.status = models.OrderPaid
	m.setCharge(o, c, e, models.PaymentSucceeded)
	m.tasks["invoice:generate:"+o.id]++
	m.tasks["email:send:order_paid:"+o.id]++
}

// setCharge records the event's charge in status: a new row, or the
// row moved where its status may leave for that one (a charge that took
// the money is left alone).
func (m *model) setCharge(o *mOrder, c *mCharge, e event, status models.PaymentStatus) {
	if c == nil {
		c = &mCharge{provider: e.provider, ref: e.ref, order: o, amount: e.amount, status: status}
		m.charges[e.provider+" "+e.ref] = c
		o.charges = append(o.charges, c)
		return
	}
	if status == models.PaymentPending || taken(c.status) || c.status == status {
		return
	}
	if status == models.PaymentFailed || status == models.PaymentExpired {
		if c.status != models.PaymentPending {
			return
		}
	}
	c.status, c.amount = status, e.amount
}

// disputeNews records a dispute's news on the charge it names.
func (m *model) disputeNews(c *mCharge, e event) outcome {
	if c == nil || !taken(c.status) {
		return stale
	}
	to := map[models.PaymentEvent]models.Dispute{models.EventDisputed: models.DisputeOpen,
		models.EventDisputeWon: models.DisputeWon, models.EventDisputeLost: models.DisputeLost}[e.status]
	rank := map[models.Dispute]int{models.DisputeNone: 0, models.DisputeOpen: 1, models.DisputeWon: 2, models.DisputeLost: 2}
	grows := to == models.DisputeLost && c.dispute == models.DisputeLost && e.amount > c.disputed
	if rank[to] <= rank[c.dispute] && !grows {
		return stale
	}
	c.dispute = to
	c.disputed = min(e.amount, c.amount)
	if to == models.DisputeWon {
		c.disputed = 0
	}
	return processed
}

// refundNews is a gateway's news of refunds of charge c: refunds it
// names, each in its state, and the total it states.
func (m *model) refundNews(o *mOrder, c *mCharge, e event) outcome {
	for _, r := range e.refunds {
		if other := m.refundOfAnotherCharge(c, r.key); other {
			return rejected(models.ReasonRefundOfOtherCharge)
		}
	}
	if c == nil {
		return stale
	}
	// What the news would make of the charge, on a copy.
	after := *c
	after.refunds = nil
	for _, r := range c.refunds {
		cp := *r
		after.refunds = append(after.refunds, &cp)
	}
	var succeeded, failed []string // the named refunds that now succeeded, failed
	undone := 0                    // of those that failed, the ones that had succeeded
	changed := false
	for _, r := range e.refunds {
		known := after.refund(r.key)
		switch {
		case known == nil && r.amount > 0:
			after.refunds = append(after.refunds, &mRefund{key: r.key, amount: r.amount, state: r.state})
		case known != nil && moves(known.state, r.state):
			if known.state == models.RefundSucceeded {
				undone++
			}
			known.state = r.state
		default:
			continue
		}
		changed = true
		if r.state == models.RefundSucceeded {
			succeeded = append(succeeded, r.key)
		} else if !counts(r.state) {
			failed = append(failed, r.key)
		}
	}
	before, now := c.refunded(), after.refunded()
	if e.amount > after.total && e.amount-now > 0 {
		after.total = e.amount
		now = after.refunded()
	}
	if now != before {
		changed = true
	}
	if !changed || !taken(c.status) {
		return stale
	}
	// What it does: only the charge's own order's refunds move the order.
	own := c.status == models.PaymentSucceeded && (o.status == models.OrderPaid || o.status == models.OrderPartiallyRefunded) ||
		c.status == models.PaymentRefunded && c.from == models.PaymentSucceeded && o.status == models.OrderRefunded
	owed := c.status == models.PaymentRefundRequired || c.status == models.PaymentRefunded && c.from == models.PaymentRefundRequired
	status := o.status
	switch {
	case now == before: // only refunds' states moved
	case now > before && own && c.status == models.PaymentSucceeded:
		status = models.OrderPartiallyRefunded
		if now == c.amount {
			status, after.status, after.from = models.OrderRefunded, models.PaymentRefunded, models.PaymentSucceeded
		}
	case now > before && c.status == models.PaymentRefundRequired:
		if now == c.amount {
			after.status, after.from = models.PaymentRefunded, models.PaymentRefundRequired
		}
	case now < before && own && o.status != models.OrderPaid:
		status, after.status, after.from = models.OrderPartiallyRefunded, models.PaymentSucceeded, ""
		if now == 0 {
			status = models.OrderPaid
		}
	case now < before && owed:
		after.status, after.from = models.PaymentRefundRequired, ""
	default: // news of a charge refunded in full, or of no order's own
		return stale
	}
	switch {
	case e.currency != "IDR":
		return rejected(models.ReasonCurrencyMismatch)
	case now > c.amount:
		return rejected(models.ReasonRefundExceedsPayment)
	}
	o.status = status
	*c = after
	o.refundTasks += len(succeeded) // each refund that succeeded: its customer's email
	o.failedTasks += undone         // and each that failed after that: the email of its failure
	m.failAccepted(c, failed)
	return processed
}

// failAccepted fails the done Sekali refunds of c that the gateway
// failed after accepting them (named by keys): refund.failed for each.
func (m *model) failAccepted(c *mCharge, keys []string) {
	for _, req := range m.requests {
		if req.charge == c && req.phase == models.GatewayDone && (slices.Contains(keys, req.key) || slices.Contains(keys, req.object)) {
			req.phase = models.GatewayFailed
			m.alerts[req.id] = true
		}
	}
}

// refundOfAnotherCharge: key names a refund the books hold for another
// charge than c.
func (m *model) refundOfAnotherCharge(c *mCharge, key string) bool {
	for _, other := range m.charges {
		if other != c && other.refund(key) != nil {
			return true
		}
	}
	return false
}

// moves: a refund may go from one state to the other.
func moves(from, to models.RefundStatus) bool {
	switch from {
	case models.RefundPending:
		return to != models.RefundPending
	case models.RefundSucceeded:
		return to == models.RefundFailed || to == models.RefundCanceled
	}
	return false
}

// The refunds an admin asks for.

// refundable is the charge a refund of o refunds, and what is left of
// it; why, when it cannot be refunded, is the answer's status.
func (m *model) refundable(o *mOrder) (c *mCharge, left int64, why int) {
	want := models.PaymentSucceeded
	switch o.status {
	case models.OrderPaid, models.OrderPartiallyRefunded:
	case models.OrderRefundRequired:
		want = models.PaymentRefundRequired
	default:
		return nil, 0, 409
	}
	for _, ch := range o.charges {
		if ch.status == want {
			c = ch
			break
		}
	}
	switch {
	case c == nil, c.provider == "sandbox": // Sekali cannot ask the sandbox for refunds here
		return nil, 0, 409
	case c.dispute == models.DisputeOpen || c.dispute == models.DisputeLost:
		return nil, 0, 409
	}
	return c, c.amount - c.refunded() - m.held(c) - c.disputed, 0
}

// held is what the refunds asked of c and not answered hold back.
func (m *model) held(c *mCharge) int64 {
	var held int64
	for _, r := range m.requests {
		if r.charge == c && (r.phase == models.GatewayAwaitingApproval || r.phase == models.GatewayPlanned || r.phase == models.GatewaySent) {
			held += r.amount
		}
	}
	return held
}

// request is refund request id.
func (m *model) request(id int64) *mRequest {
	for _, r := range m.requests {
		if r.id == id {
			return r
		}
	}
	return nil
}

// ask is an admin's refund of amount (0: all that is left) of o; it
// returns the answer's status and the request, numbered id.
func (m *model) ask(o *mOrder, amount, id int64) (int, *mRequest) {
	c, left, why := m.refundable(o)
	if why != 0 {
		return why, nil
	}
	if amount == 0 {
		amount = left
	}
	if amount <= 0 || amount > left {
		return 422, nil
	}
	var asked, recent int64
	for _, r := range m.requests {
		if r.charge.order == o {
			asked++
			if r.phase != models.GatewayFailed && r.phase != models.GatewayDeclined && r.phase != models.GatewayDiscarded {
				recent += r.amount
			}
		}
	}
	r := &mRequest{id: id, charge: c, key: o.id + "-R" + strconv.FormatInt(asked+1, 10), amount: amount, phase: models.GatewayPlanned}
	if recent+amount > m.approvalAbove {
		r.phase = models.GatewayAwaitingApproval
	} else {
		m.tasks["refund:send:"+strconv.FormatInt(r.id, 10)]++
	}
	m.requests = append(m.requests, r)
	return 202, r
}

// fits: r, not sent, still fits in what is left of its charge.
func (m *model) fits(r *mRequest) bool {
	c := r.charge
	if c.dispute == models.DisputeOpen || c.dispute == models.DisputeLost {
		return false
	}
	return r.amount <= c.amount-c.refunded()-m.held(c)-c.disputed+r.amount
}

// approve is an owner's approval: the answer's status.
func (m *model) approve(r *mRequest) int {
	if r.phase != models.GatewayAwaitingApproval || !m.fits(r) {
		return 409
	}
	r.phase = models.GatewayPlanned
	m.tasks["refund:send:"+strconv.FormatInt(r.id, 10)]++
	return 303
}

// decline is an owner's decline: the answer's status.
func (m *model) decline(r *mRequest) int {
	if r.phase != models.GatewayAwaitingApproval {
		return 409
	}
	r.phase = models.GatewayDeclined
	return 303
}

// discard is an operator's discard of r's failed job: the answer's
// status. Its lease has passed (the test moves it).
func (m *model) discard(r *mRequest) int {
	if r.phase == models.GatewayPlanned || r.phase == models.GatewaySent {
		r.phase = models.GatewayDiscarded
	}
	return 200
}

// sent is the gateway's answer to refund r: done, with its refund
// (object, the gateway's id of it; in state), whose answer also states
// the charge's refunded total at the gateway where the gateway does
// (Stripe; else 0). A refund never sent that no longer fits fails
// unsent instead.
func (m *model) sent(r *mRequest, object string, state models.RefundStatus, total int64) {
	c := r.charge
	amount := r.amount
	if total > 0 {
		amount = total
	}
	m.refundNews(c.order, c, event{provider: c.provider, key: "refund:" + r.key, order: c.order.id, ref: c.ref,
		status: models.EventRefunded, amount: amount, currency: "IDR", refunds: []mRefund{{key: object, amount: r.amount, state: state}}})
	// An answer the books could not take — above what is left, or about
	// a charge refunded in full — is done at the gateway and counted
	// nowhere: the books no longer hold. (One told before by the
	// notification is counted already; a charge total stands in for one
	// the gateway has not named.)
	if named := c.refund(object); named == nil && c.refunded() <= c.named() {
		m.broken = true
	}
	r.phase, r.object = models.GatewayDone, object
	if named := c.refund(object); named != nil && !counts(named.state) && named.state != models.RefundSuperseded {
		r.phase = models.GatewayFailed // failed before its answer came
		m.alerts[r.id] = true
	}
}

// unanswered is a call to the gateway for r whose answer is unknown (a
// 500): r stays sent, and is asked again.
func (m *model) unanswered(r *mRequest) { r.phase = models.GatewaySent }

// unfit is refund r, never sent, found not to fit in what is left of its
// charge when it was to be sent: it fails unsent.
func (m *model) unfit(r *mRequest) { m.refused(r) }

// refused is refund r failed: the gateway said no, or it was not sent.
func (m *model) refused(r *mRequest) {
	r.phase = models.GatewayFailed
	m.alerts[r.id] = true
}
