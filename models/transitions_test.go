package models_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sekali/sekali/models"
)

var (
	allStatuses = []models.OrderStatus{
		models.OrderPending, models.OrderPaid, models.OrderFailed,
		models.OrderExpired, models.OrderCancelled, models.OrderRefundRequired, models.OrderPartiallyRefunded,
	}
	allEvents = []models.PaymentEvent{
		models.EventPaid, models.EventDeclined, models.EventFailed, models.EventExpired, models.EventPending,
	}
	allActions = []models.Action{
		models.ActionStale, models.ActionRecordPending, models.ActionPay, models.ActionDecline, models.ActionFail,
		models.ActionExpire, models.ActionRereserve, models.ActionSecondCharge,
	}
)

// decideTable is the event × state table of docs/state-machine.md written
// out, one row per (state, event, chargeKnown).
var decideTable = []struct {
	status      models.OrderStatus
	event       models.PaymentEvent
	chargeKnown bool
	want        models.Action
}{
	// pending: every event applies; a pending order has no charge yet, so
	// chargeKnown does not change the outcome.
	{models.OrderPending, models.EventPaid, false, models.ActionPay},
	{models.OrderPending, models.EventPaid, true, models.ActionPay},
	{models.OrderPending, models.EventDeclined, false, models.ActionDecline},
	{models.OrderPending, models.EventDeclined, true, models.ActionDecline},
	{models.OrderPending, models.EventFailed, false, models.ActionFail},
	{models.OrderPending, models.EventFailed, true, models.ActionFail},
	{models.OrderPending, models.EventExpired, false, models.ActionExpire},
	{models.OrderPending, models.EventExpired, true, models.ActionExpire},
	{models.OrderPending, models.EventPending, false, models.ActionRecordPending},
	{models.OrderPending, models.EventPending, true, models.ActionRecordPending},

	// paid: only a new reference's paid event does something (a second charge).
	{models.OrderPaid, models.EventPaid, false, models.ActionSecondCharge},
	{models.OrderPaid, models.EventPaid, true, models.ActionStale},
	{models.OrderPaid, models.EventDeclined, false, models.ActionStale},
	{models.OrderPaid, models.EventDeclined, true, models.ActionStale},
	{models.OrderPaid, models.EventFailed, false, models.ActionStale},
	{models.OrderPaid, models.EventFailed, true, models.ActionStale},
	{models.OrderPaid, models.EventExpired, false, models.ActionStale},
	{models.OrderPaid, models.EventExpired, true, models.ActionStale},
	{models.OrderPaid, models.EventPending, false, models.ActionStale},
	{models.OrderPaid, models.EventPending, true, models.ActionStale},

	// failed / expired / cancelled: a late payment re-reserves; a charge
	// already recorded was applied before.
	{models.OrderFailed, models.EventPaid, false, models.ActionRereserve},
	{models.OrderFailed, models.EventPaid, true, models.ActionStale},
	{models.OrderFailed, models.EventDeclined, false, models.ActionStale},
	{models.OrderFailed, models.EventDeclined, true, models.ActionStale},
	{models.OrderFailed, models.EventFailed, false, models.ActionStale},
	{models.OrderFailed, models.EventFailed, true, models.ActionStale},
	{models.OrderFailed, models.EventExpired, false, models.ActionStale},
	{models.OrderFailed, models.EventExpired, true, models.ActionStale},
	{models.OrderFailed, models.EventPending, false, models.ActionStale},
	{models.OrderFailed, models.EventPending, true, models.ActionStale},

	{models.OrderExpired, models.EventPaid, false, models.ActionRereserve},
	{models.OrderExpired, models.EventPaid, true, models.ActionStale},
	{models.OrderExpired, models.EventDeclined, false, models.ActionStale},
	{models.OrderExpired, models.EventDeclined, true, models.ActionStale},
	{models.OrderExpired, models.EventFailed, false, models.ActionStale},
	{models.OrderExpired, models.EventFailed, true, models.ActionStale},
	{models.OrderExpired, models.EventExpired, false, models.ActionStale},
	{models.OrderExpired, models.EventExpired, true, models.ActionStale},
	{models.OrderExpired, models.EventPending, false, models.ActionStale},
	{models.OrderExpired, models.EventPending, true, models.ActionStale},

	{models.OrderCancelled, models.EventPaid, false, models.ActionRereserve},
	{models.OrderCancelled, models.EventPaid, true, models.ActionStale},
	{models.OrderCancelled, models.EventDeclined, false, models.ActionStale},
	{models.OrderCancelled, models.EventDeclined, true, models.ActionStale},
	{models.OrderCancelled, models.EventFailed, false, models.ActionStale},
	{models.OrderCancelled, models.EventFailed, true, models.ActionStale},
	{models.OrderCancelled, models.EventExpired, false, models.ActionStale},
	{models.OrderCancelled, models.EventExpired, true, models.ActionStale},
	{models.OrderCancelled, models.EventPending, false, models.ActionStale},
	{models.OrderCancelled, models.EventPending, true, models.ActionStale},

	// refund_required: a new reference is one more charge to refund.
	{models.OrderRefundRequired, models.EventPaid, false, models.ActionSecondCharge},
	{models.OrderRefundRequired, models.EventPaid, true, models.ActionStale},
	{models.OrderRefundRequired, models.EventDeclined, false, models.ActionStale},
	{models.OrderRefundRequired, models.EventDeclined, true, models.ActionStale},
	{models.OrderRefundRequired, models.EventFailed, false, models.ActionStale},
	{models.OrderRefundRequired, models.EventFailed, true, models.ActionStale},
	{models.OrderRefundRequired, models.EventExpired, false, models.ActionStale},
	{models.OrderRefundRequired, models.EventExpired, true, models.ActionStale},
	{models.OrderRefundRequired, models.EventPending, false, models.ActionStale},
	{models.OrderRefundRequired, models.EventPending, true, models.ActionStale},

	// partially_refunded: as paid, a new reference is a second charge.
	{models.OrderPartiallyRefunded, models.EventPaid, false, models.ActionSecondCharge},
	{models.OrderPartiallyRefunded, models.EventPaid, true, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventDeclined, false, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventDeclined, true, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventFailed, false, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventFailed, true, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventExpired, false, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventExpired, true, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventPending, false, models.ActionStale},
	{models.OrderPartiallyRefunded, models.EventPending, true, models.ActionStale},
}

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, tt := range decideTable {
		if got := models.Decide(tt.status, tt.event, tt.chargeKnown); got != tt.want {
			t.Errorf("Decide(%s, %s, chargeKnown=%v) = %s, want %s", tt.status, tt.event, tt.chargeKnown, got, tt.want)
		}
	}
}

// A state or event added later must get rows above, not a silent default.
func TestDecideTableCoversEveryCombination(t *testing.T) {
	t.Parallel()
	type key struct {
		s     models.OrderStatus
		ev    models.PaymentEvent
		known bool
	}
	seen := map[key]int{}
	for _, tt := range decideTable {
		seen[key{tt.status, tt.event, tt.chargeKnown}]++
	}
	for _, s := range allStatuses {
		for _, ev := range allEvents {
			for _, known := range []bool{false, true} {
				if n := seen[key{s, ev, known}]; n != 1 {
					t.Errorf("decideTable has %d rows for (%s, %s, %v), want 1", n, s, ev, known)
				}
			}
		}
	}
	if len(decideTable) != len(allStatuses)*len(allEvents)*2 {
		t.Errorf("decideTable has %d rows, want %d", len(decideTable), len(allStatuses)*len(allEvents)*2)
	}
}

// Input from outside the enums must never change anything.
func TestDecideUnknownInputIsStale(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s  models.OrderStatus
		ev models.PaymentEvent
	}{
		{"", models.EventPaid},
		{"shipped", models.EventPaid},
		{"PAID", models.EventPaid},
		{models.OrderPending, ""},
		{models.OrderPending, "refunded"},
		{models.OrderFailed, "PAID"},
	}
	for _, tt := range tests {
		for _, known := range []bool{false, true} {
			if got := models.Decide(tt.s, tt.ev, known); got != models.ActionStale {
				t.Errorf("Decide(%q, %q, %v) = %s, want stale", tt.s, tt.ev, known, got)
			}
		}
	}
}

func TestPaymentEventValid(t *testing.T) {
	t.Parallel()
	for _, ev := range allEvents {
		if !ev.Valid() {
			t.Errorf("%q.Valid() = false", ev)
		}
	}
	for _, ev := range []models.PaymentEvent{"", "PAID", "paid ", "succeeded", "refund_required"} {
		if ev.Valid() {
			t.Errorf("%q.Valid() = true", ev)
		}
	}
}

func TestActionProperties(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a            models.Action
		checksAmount bool
		payment      models.PaymentStatus
		paymentOK    bool
		releases     bool
	}{
		{models.ActionStale, false, "", false, false},
		{models.ActionRecordPending, false, models.PaymentPending, true, false},
		{models.ActionPay, true, models.PaymentSucceeded, true, false},
		{models.ActionDecline, false, models.PaymentFailed, true, false},
		{models.ActionFail, false, models.PaymentFailed, true, true},
		{models.ActionExpire, false, models.PaymentExpired, true, true},
		// The payment status of a re-reservation depends on the stock.
		{models.ActionRereserve, true, "", false, false},
		{models.ActionSecondCharge, false, models.PaymentRefundRequired, true, false},
		{"bogus", false, "", false, false},
	}
	if len(tests) != len(allActions)+1 {
		t.Fatalf("table has %d rows, want one per action plus an unknown one", len(tests))
	}
	for _, tt := range tests {
		if got := tt.a.ChecksAmount(); got != tt.checksAmount {
			t.Errorf("%s.ChecksAmount() = %v, want %v", tt.a, got, tt.checksAmount)
		}
		if got, ok := tt.a.PaymentStatus(); got != tt.payment || ok != tt.paymentOK {
			t.Errorf("%s.PaymentStatus() = %q, %v; want %q, %v", tt.a, got, ok, tt.payment, tt.paymentOK)
		}
		if got := tt.a.Releases(); got != tt.releases {
			t.Errorf("%s.Releases() = %v, want %v", tt.a, got, tt.releases)
		}
	}
}

func TestActionOrderStatusAfter(t *testing.T) {
	t.Parallel()
	// Actions not listed leave the status as it is.
	fixed := map[models.Action]models.OrderStatus{
		models.ActionPay:    models.OrderPaid,
		models.ActionFail:   models.OrderFailed,
		models.ActionExpire: models.OrderExpired,
	}
	for _, a := range allActions {
		for _, s := range allStatuses {
			want, ok := fixed[a]
			if !ok {
				want = s
			}
			if got := a.OrderStatusAfter(s); got != want {
				t.Errorf("%s.OrderStatusAfter(%s) = %s, want %s", a, s, got, want)
			}
		}
	}
}

// Every decided action must keep the audit's stock rule (check 2,
// reservations, in docs/README.md#the-integrity-audit): an order holds its
// stock exactly when its status says so, and a stale event changes
// nothing at all.
func TestDecideKeepsStockRule(t *testing.T) {
	t.Parallel()
	for _, s := range allStatuses {
		for _, ev := range allEvents {
			for _, known := range []bool{false, true} {
				a := models.Decide(s, ev, known)
				if a == models.ActionRereserve {
					if s.HoldsStock() {
						t.Errorf("Decide(%s, %s, %v) re-reserves an order that holds its stock", s, ev, known)
					}
					continue
				}
				after := a.OrderStatusAfter(s)
				if a.Releases() != (s.HoldsStock() && !after.HoldsStock()) {
					t.Errorf("Decide(%s, %s, %v) = %s: %s -> %s but Releases() = %v", s, ev, known, a, s, after, a.Releases())
				}
				if !a.Releases() && s.HoldsStock() != after.HoldsStock() {
					t.Errorf("Decide(%s, %s, %v) = %s moves %s -> %s without moving stock", s, ev, known, a, s, after)
				}
				if a.ChecksAmount() && ev != models.EventPaid {
					t.Errorf("Decide(%s, %s, %v) = %s checks the amount of a non-paid event", s, ev, known, a)
				}
				if a == models.ActionStale {
					if ps, ok := a.PaymentStatus(); ok {
						t.Errorf("stale action writes payment status %s", ps)
					}
					if after != s {
						t.Errorf("stale action moves %s to %s", s, after)
					}
				}
			}
		}
	}
}

func TestOrderStatusHoldsStock(t *testing.T) {
	t.Parallel()
	want := map[models.OrderStatus]bool{
		models.OrderPending:           true,
		models.OrderPaid:              true,
		models.OrderFailed:            false,
		models.OrderExpired:           false,
		models.OrderCancelled:         false,
		models.OrderRefundRequired:    false,
		models.OrderPartiallyRefunded: true,
		models.OrderRefunded:          true, // a refund does not bring the goods back
		"":                            false,
		"unknown":                     false,
	}
	for s, w := range want {
		if got := s.HoldsStock(); got != w {
			t.Errorf("%q.HoldsStock() = %v, want %v", s, got, w)
		}
	}
}

// refundTable is the refund part of docs/state-machine.md written out:
// what refund news does to a charge of 100 that moves what counts as
// refunded of it from before to after, by the order's state, the
// charge's payment status and, for a refunded charge, the status it had.
var refundTable = []struct {
	status        models.OrderStatus
	charge, from  models.PaymentStatus
	before, after int64
	want          models.Action
}{
	// The order's own charge: refunds grow it to partially_refunded, then
	// refunded ...
	{models.OrderPaid, models.PaymentSucceeded, "", 0, 40, models.ActionPartialRefund},
	{models.OrderPaid, models.PaymentSucceeded, "", 0, 100, models.ActionRefund},
	{models.OrderPartiallyRefunded, models.PaymentSucceeded, "", 40, 70, models.ActionPartialRefund},
	{models.OrderPartiallyRefunded, models.PaymentSucceeded, "", 40, 100, models.ActionRefund},
	// ... and refunds that fail after they counted give their money back
	// to the charge: refunded → partially_refunded or paid,
	// partially_refunded → paid (or stays while others count).
	{models.OrderRefunded, models.PaymentRefunded, models.PaymentSucceeded, 100, 0, models.ActionRefundFailed},
	{models.OrderRefunded, models.PaymentRefunded, models.PaymentSucceeded, 100, 60, models.ActionPartialRefundFailed},
	{models.OrderPartiallyRefunded, models.PaymentSucceeded, "", 40, 0, models.ActionRefundFailed},
	{models.OrderPartiallyRefunded, models.PaymentSucceeded, "", 70, 40, models.ActionPartialRefundFailed},
	// A charge that had to go back (a second charge, a late payment
	// without stock): its payment only.
	{models.OrderPaid, models.PaymentRefundRequired, "", 0, 40, models.ActionPartialRefundCharge},
	{models.OrderPaid, models.PaymentRefundRequired, "", 0, 100, models.ActionRefundCharge},
	{models.OrderRefundRequired, models.PaymentRefundRequired, "", 40, 100, models.ActionRefundCharge},
	{models.OrderRefundRequired, models.PaymentRefunded, models.PaymentRefundRequired, 100, 0, models.ActionRefundChargeFailed},
	{models.OrderPaid, models.PaymentRefunded, models.PaymentRefundRequired, 100, 60, models.ActionRefundChargeFailed},
	{models.OrderRefundRequired, models.PaymentRefundRequired, "", 40, 0, models.ActionRefundChargeFailed},
	// A refunded order's second charge, both refunded: the one that had
	// to go back is not the order's own.
	{models.OrderRefunded, models.PaymentRefunded, models.PaymentRefundRequired, 100, 0, models.ActionRefundChargeFailed},
	// Anything else is stale: a charge never taken, a refunded charge
	// that would grow, news that changes no amount.
	{models.OrderPending, "", "", 0, 40, models.ActionStale},
	{models.OrderPending, models.PaymentPending, "", 0, 40, models.ActionStale},
	{models.OrderPaid, models.PaymentFailed, "", 0, 40, models.ActionStale},
	{models.OrderExpired, models.PaymentExpired, "", 0, 40, models.ActionStale},
	{models.OrderRefunded, models.PaymentRefunded, models.PaymentSucceeded, 100, 100, models.ActionStale},
	{models.OrderPaid, models.PaymentSucceeded, "", 40, 40, models.ActionStale},
	{models.OrderFailed, models.PaymentSucceeded, "", 0, 40, models.ActionStale},
}

// DecideRefund against the table; every action it decides moves the
// order and the payment as its name says and never gives stock back.
func TestDecideRefund(t *testing.T) {
	t.Parallel()
	for _, tc := range refundTable {
		got := models.DecideRefund(tc.status, tc.charge, tc.from, tc.before, tc.after, 100)
		if got != tc.want {
			t.Errorf("DecideRefund(%s, %q from %q, %d → %d) = %s, want %s", tc.status, tc.charge, tc.from, tc.before, tc.after, got, tc.want)
		}
		if got == models.ActionStale {
			continue
		}
		if !got.Refunds() {
			t.Errorf("%s records no refund", got)
		}
		if from := got.OrderFrom(); from != nil && !slices.Contains(from, tc.status) {
			t.Errorf("%s on %s: its UPDATE does not admit %s (%v)", got, tc.status, tc.status, from)
		}
		after := got.OrderStatusAfter(tc.status)
		ps, ok := got.PaymentStatus()
		switch {
		case got == models.ActionRefund && (after != models.OrderRefunded || ps != models.PaymentRefunded),
			got == models.ActionPartialRefund && (after != models.OrderPartiallyRefunded || ok),
			got == models.ActionRefundFailed && (after != models.OrderPaid || ps != models.PaymentSucceeded),
			got == models.ActionPartialRefundFailed && (after != models.OrderPartiallyRefunded || ps != models.PaymentSucceeded),
			got == models.ActionRefundCharge && (after != tc.status || ps != models.PaymentRefunded),
			got == models.ActionPartialRefundCharge && (after != tc.status || ok),
			got == models.ActionRefundChargeFailed && (after != tc.status || ps != models.PaymentRefundRequired):
			t.Errorf("%s on %s: the order becomes %s, the payment %q (%v)", got, tc.status, after, ps, ok)
		}
		if tc.status.HoldsStock() != after.HoldsStock() {
			t.Errorf("%s on %s moves stock: a refund, or its failure, does not", got, tc.status)
		}
	}
	for _, s := range allStatuses {
		if a := models.Decide(s, models.EventRefunded, true); a != models.ActionStale {
			t.Errorf("Decide(%s, refunded) = %s: refunds are DecideRefund's", s, a)
		}
	}
}

// A refund's states: pending may become anything final or succeeded;
// succeeded may still fail (some gateways say so); nothing leaves a final state;
// only pending and succeeded count.
func TestRefundMoves(t *testing.T) {
	t.Parallel()
	states := []models.RefundStatus{models.RefundPending, models.RefundSucceeded, models.RefundFailed, models.RefundCanceled, models.RefundSuperseded}
	allowed := map[[2]models.RefundStatus]bool{
		{models.RefundPending, models.RefundSucceeded}:  true,
		{models.RefundPending, models.RefundFailed}:     true,
		{models.RefundPending, models.RefundCanceled}:   true,
		{models.RefundSucceeded, models.RefundFailed}:   true,
		{models.RefundSucceeded, models.RefundCanceled}: true,
	}
	for _, from := range states {
		for _, to := range states {
			if got := models.RefundMoves(from, to); got != allowed[[2]models.RefundStatus{from, to}] {
				t.Errorf("RefundMoves(%s, %s) = %v", from, to, got)
			}
		}
		if want := from == models.RefundPending || from == models.RefundSucceeded; from.Counts() != want {
			t.Errorf("%s.Counts() = %v, want %v", from, from.Counts(), want)
		}
	}
}

func TestMovementKindSign(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k    models.MovementKind
		want int64
	}{
		{models.MovementAdjust, 1},
		{models.MovementReserve, -1},
		{models.MovementRelease, 1},
		{models.MovementRereserve, -1},
	}
	for _, tt := range tests {
		if got := tt.k.Sign(); got != tt.want {
			t.Errorf("%s.Sign() = %d, want %d", tt.k, got, tt.want)
		}
	}
}

func TestErrorCodeAndMessage(t *testing.T) {
	t.Parallel()
	wrapped := models.Errorf(models.EInsufficientStock, "insufficient stock for %s", "MUG")
	tests := []struct {
		name     string
		err      error
		code     string
		msg      string
		wantText string
	}{
		{"nil", nil, "", "", ""},
		{"coded", wrapped, models.EInsufficientStock, "insufficient stock for MUG", "insufficient_stock: insufficient stock for MUG"},
		{"wrapped", wrapErr{wrapped}, models.EInsufficientStock, "insufficient stock for MUG", ""},
		{"plain", errPlain("pq: connection refused to 10.0.0.1"), models.EInternal, "internal error", ""},
	}
	for _, tt := range tests {
		if got := models.ErrorCode(tt.err); got != tt.code {
			t.Errorf("%s: ErrorCode = %q, want %q", tt.name, got, tt.code)
		}
		if got := models.ErrorMessage(tt.err); got != tt.msg {
			t.Errorf("%s: ErrorMessage = %q, want %q", tt.name, got, tt.msg)
		}
		if tt.wantText != "" && tt.err.Error() != tt.wantText {
			t.Errorf("%s: Error() = %q, want %q", tt.name, tt.err.Error(), tt.wantText)
		}
	}
}

type errPlain string

func (e errPlain) Error() string { return string(e) }

type wrapErr struct{ err error }

func (w wrapErr) Error() string { return "orders.Create: " + w.err.Error() }
func (w wrapErr) Unwrap() error { return w.err }

func TestValidCurrency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"IDR", true},
		{"USD", true},
		{"ZZZ", true},
		{models.DefaultCurrency, true},
		{"", false},
		{"ID", false},
		{"IDRR", false},
		{"idr", false},
		{"Idr", false},
		{"I1R", false},
		{"ID ", false},
		{" ID", false},
		{"ÄB", false}, // three bytes, not three letters
		{"I\x00R", false},
	}
	for _, tt := range tests {
		if got := models.ValidCurrency(tt.in); got != tt.want {
			t.Errorf("ValidCurrency(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestNewOrderID(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	times := []time.Time{
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		t0,
		t0.Add(time.Millisecond),
		t0.Add(2 * time.Millisecond),
		t0.Add(time.Second),
		t0.Add(time.Hour),
		t0.AddDate(1, 0, 0),
		time.Date(2100, 1, 1, 0, 0, 0, 0, time.FixedZone("WIB", 7*3600)),
	}
	var ids []string
	for _, tm := range times {
		id := models.NewOrderID(tm)
		ids = append(ids, id)
		rest, ok := strings.CutPrefix(id, "ORD-")
		if !ok {
			t.Errorf("NewOrderID(%v) = %q, want prefix ORD-", tm, id)
			continue
		}
		if len(rest) != 26 {
			t.Errorf("NewOrderID(%v) = %q: %d characters after the prefix, want 26", tm, id, len(rest))
		}
		u, err := ulid.ParseStrict(rest)
		if err != nil {
			t.Errorf("NewOrderID(%v) = %q: not a ULID: %v", tm, id, err)
			continue
		}
		if got := ulid.Time(u.Time()); !got.Equal(tm.Truncate(time.Millisecond)) {
			t.Errorf("NewOrderID(%v) carries time %v", tm, got)
		}
		if !models.ValidOrderID(id) {
			t.Errorf("ValidOrderID(%q) = false for a new id", id)
		}
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids made at increasing times do not sort: %q", ids)
	}
	if a, b := models.NewOrderID(t0), models.NewOrderID(t0); a == b {
		t.Errorf("two ids for the same instant are equal: %s", a)
	}
}

// Ids made in the same millisecond do not give each other away: with a
// monotonic entropy source each id is the last one plus a small step, so
// the high half of the random part repeats and the next id is a few
// guesses away. From crypto/rand, it never repeats.
func TestOrderIDsAreNotPredictable(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for range 200 {
		id := ulid.MustParseStrict(strings.TrimPrefix(models.NewOrderID(t0), models.OrderIDPrefix))
		entropy := id.Entropy()
		high := string(entropy[:5]) // 40 of the 80 random bits
		if seen[high] {
			t.Fatalf("two ids of one millisecond share the high 40 random bits %x: the ids are predictable", entropy[:5])
		}
		seen[high] = true
	}
}

func TestValidOrderID(t *testing.T) {
	t.Parallel()
	good := models.NewOrderID(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ulidPart := strings.TrimPrefix(good, "ORD-")
	tests := []struct {
		id   string
		want bool
	}{
		{good, true},
		{"ORD-01ARZ3NDEKTSV4RRFFQ69G5FAV", true},
		{"", false},
		{"ORD-", false},
		{ulidPart, false},
		{"ord-" + ulidPart, false},
		{"ORD_" + ulidPart, false},
		{"ORD-" + ulidPart[:25], false},
		{"ORD-" + ulidPart + "0", false},
		{" ORD-" + ulidPart, false},
		{"ORD-" + ulidPart + " ", false},
		{"ORD-ORD-" + ulidPart, false},
		{"ORD-01ARZ3NDEKTSV4RRFFQ69G5FAU", false}, // U is not in the alphabet
		{"ORD-81ARZ3NDEKTSV4RRFFQ69G5FAV", false}, // overflows 48 bits of time
		{"ORD-1", false},
		{"ORD-123", false},
	}
	for _, tt := range tests {
		if got := models.ValidOrderID(tt.id); got != tt.want {
			t.Errorf("ValidOrderID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

// OrderFrom is the WHERE of each action's conditional UPDATE: an action
// Decide (or DecideRefund) returns for an order in state s may leave s.
func TestActionOrderFromAdmitsEveryDecidedState(t *testing.T) {
	t.Parallel()
	for _, s := range allStatuses {
		for _, ev := range allEvents {
			for _, known := range []bool{false, true} {
				a := models.Decide(s, ev, known)
				if from := a.OrderFrom(); from != nil && !slices.Contains(from, s) {
					t.Errorf("Decide(%s, %s, %v) = %s, whose UPDATE does not admit %s (%v)", s, ev, known, a, s, from)
				}
				if a.OrderFrom() == nil && a.OrderStatusAfter(s) != s {
					t.Errorf("%s moves %s to %s without an UPDATE", a, s, a.OrderStatusAfter(s))
				}
			}
		}
		for _, charge := range []models.PaymentStatus{models.PaymentSucceeded, models.PaymentRefundRequired, models.PaymentRefunded, models.PaymentPending, ""} {
			for _, from := range []models.PaymentStatus{"", models.PaymentSucceeded, models.PaymentRefundRequired} {
				for _, move := range [][2]int64{{0, 40}, {0, 100}, {40, 0}, {100, 40}, {100, 0}} {
					a := models.DecideRefund(s, charge, from, move[0], move[1], 100)
					if to := a.OrderFrom(); to != nil && !slices.Contains(to, s) {
						t.Errorf("DecideRefund(%s, %q from %q, %v) = %s, whose UPDATE does not admit %s", s, charge, from, move, a, s)
					}
				}
			}
		}
	}
}

// A refunded order has had its charge: a new paid event is a second
// charge (to be refunded), the refunded charge again is stale, and every
// other event changes nothing.
func TestDecideOnARefundedOrder(t *testing.T) {
	t.Parallel()
	for _, ev := range allEvents {
		for _, known := range []bool{false, true} {
			want := models.ActionStale
			if ev == models.EventPaid && !known {
				want = models.ActionSecondCharge
			}
			if got := models.Decide(models.OrderRefunded, ev, known); got != want {
				t.Errorf("Decide(refunded, %s, %v) = %s, want %s", ev, known, got, want)
			}
		}
	}
}

// A dispute is recorded on a charge that was taken, and only moves
// forward: none, open, then won or lost. A dispute of a charge never
// taken, one told again, or a late "opened" after the close is stale;
// Decide leaves every dispute event to DecideDispute.
func TestDecideDispute(t *testing.T) {
	t.Parallel()
	taken := []models.PaymentStatus{models.PaymentSucceeded, models.PaymentRefundRequired, models.PaymentRefunded}
	for _, tc := range []struct {
		ev           models.PaymentEvent
		current      models.Dispute
		held, amount int64
		want         models.Action
	}{
		{models.EventDisputed, models.DisputeNone, 0, 100, models.ActionDispute},
		{models.EventDisputed, models.DisputeOpen, 100, 100, models.ActionStale},
		{models.EventDisputed, models.DisputeLost, 100, 100, models.ActionStale},
		{models.EventDisputeWon, models.DisputeNone, 0, 100, models.ActionDispute},
		{models.EventDisputeWon, models.DisputeOpen, 100, 100, models.ActionDispute},
		{models.EventDisputeLost, models.DisputeOpen, 100, 100, models.ActionDispute},
		{models.EventDisputeLost, models.DisputeWon, 0, 100, models.ActionStale},
		// A partial chargeback, then the whole: the lost
		// dispute grows; told again, or smaller, it is stale.
		{models.EventDisputeLost, models.DisputeNone, 0, 40, models.ActionDispute},
		{models.EventDisputeLost, models.DisputeLost, 40, 100, models.ActionDispute},
		{models.EventDisputeLost, models.DisputeLost, 100, 100, models.ActionStale},
		{models.EventDisputeLost, models.DisputeLost, 100, 40, models.ActionStale},
		{models.EventPaid, models.DisputeNone, 0, 100, models.ActionStale},
	} {
		for _, charge := range taken {
			if got := models.DecideDispute(tc.ev, charge, tc.current, tc.held, tc.amount); got != tc.want {
				t.Errorf("DecideDispute(%s, %s, %q, %d, %d) = %s, want %s", tc.ev, charge, tc.current, tc.held, tc.amount, got, tc.want)
			}
		}
		for _, charge := range []models.PaymentStatus{"", models.PaymentPending, models.PaymentFailed, models.PaymentExpired} {
			if got := models.DecideDispute(tc.ev, charge, tc.current, tc.held, tc.amount); got != models.ActionStale {
				t.Errorf("DecideDispute(%s, %q, %q) = %s: a charge never taken cannot be disputed", tc.ev, charge, tc.current, got)
			}
		}
	}
	for _, s := range append(allStatuses, models.OrderRefunded) {
		for _, ev := range []models.PaymentEvent{models.EventDisputed, models.EventDisputeWon, models.EventDisputeLost} {
			if !ev.Valid() || models.Decide(s, ev, true) != models.ActionStale || models.ActionDispute.OrderStatusAfter(s) != s {
				t.Errorf("%s on %s: Valid %v, Decide %s; want valid, left to DecideDispute, the order unchanged", ev, s, ev.Valid(), models.Decide(s, ev, true))
			}
		}
	}
}
