package audit_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sekali/sekali/models"
)

// TestStateMachineDocMatchesTheModel holds docs/state-machine.md's
// tables to the reference model: the stock each order state holds, what
// each event does in each order state (for a new charge and for one
// taken before), and which statuses a payment row may leave for each.
func TestStateMachineDocMatchesTheModel(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/state-machine.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)

	holdsTable := rows(t, page, "| state | holds its stock |")
	for _, r := range holdsTable {
		s := models.OrderStatus(code(r[0]))
		if got, want := strings.HasPrefix(r[1], "yes"), holds(s); got != want {
			t.Errorf("the page says %s holds its stock: %v; the model: %v", s, got, want)
		}
	}
	if len(holdsTable) != 8 {
		t.Errorf("the page lists %d order states, want 8", len(holdsTable))
	}

	events := []models.PaymentEvent{models.EventPaid, models.EventDeclined, models.EventFailed, models.EventExpired, models.EventPending}
	cells := 0
	for _, r := range rows(t, page, "| order state | `paid` |") {
		for _, state := range codes(r[0]) {
			for i, ev := range events {
				for known, want := range variants(r[i+1]) {
					if known && state == string(models.OrderPending) {
						continue // a pending order has no charge taken: the first one pays it
					}
					if got := modelAction(models.OrderStatus(state), ev, known); got != want {
						t.Errorf("%s on a %s order (a charge taken before: %v): the page says %s, the model does %s", ev, state, known, want, got)
					}
					cells++
				}
			}
		}
	}
	if cells < 8*5+7*5 {
		t.Errorf("read %d cells of the event × state table, want at least %d", cells, 8*5+7*5)
	}

	for _, r := range rows(t, page, "| target status | may leave from |") {
		to := models.PaymentStatus(code(r[0]))
		if to == models.PaymentRefunded {
			continue // only refund news leaves for it: the refund tables say when
		}
		from := codes(r[1])
		for _, s := range []models.PaymentStatus{models.PaymentPending, models.PaymentFailed, models.PaymentExpired,
			models.PaymentSucceeded, models.PaymentRefundRequired, models.PaymentRefunded} {
			if s == to {
				continue
			}
			c := &mCharge{status: s, amount: price}
			new(model).setCharge(&mOrder{}, c, event{amount: price}, to)
			if moved, listed := c.status == to, contains(from, string(s)); moved != listed {
				t.Errorf("a %s payment row to %s: the page says it may leave: %v; the model moves it: %v", s, to, listed, moved)
			}
		}
	}
}

// modelAction is what the model does with event ev of a charge — new,
// or taken before (known) — on an order in state s, named as the page
// names the actions.
func modelAction(s models.OrderStatus, ev models.PaymentEvent, known bool) string {
	m := newModel(approvalAbove)
	m.stock["MUG"] = 1
	o := &mOrder{id: "ORD-DOC", sku: "MUG", total: price, status: s}
	m.orders[o.id] = o
	if holds(s) {
		m.stock["MUG"] = 0
	}
	if known {
		status := models.PaymentSucceeded
		if !o.status.Refundable() && s != models.OrderRefunded {
			status = models.PaymentRefundRequired
		}
		c := &mCharge{provider: "sandbox", ref: "tx-known", order: o, amount: price, status: status}
		m.charges["sandbox tx-known"] = c
		o.charges = append(o.charges, c)
	}
	ref := "tx-new"
	if known {
		ref = "tx-known"
	}
	out := m.deliver(event{provider: "sandbox", key: "evt", order: o.id, ref: ref, status: ev, amount: price, currency: "IDR"})
	c := m.charges["sandbox "+ref]
	switch {
	case out.result == models.ResultStale:
		return "stale"
	case out.result != models.ResultProcessed:
		return out.result
	case s == models.OrderPending && o.status == models.OrderPaid:
		return "pay"
	case s == models.OrderPending && o.status == models.OrderFailed:
		return "fail"
	case s == models.OrderPending && o.status == models.OrderExpired:
		return "expire"
	case s == models.OrderPending && c.status == models.PaymentFailed:
		return "decline"
	case s == models.OrderPending && c.status == models.PaymentPending:
		return "record_pending"
	case o.status != s:
		return "rereserve"
	case c.status == models.PaymentRefundRequired:
		return "second_charge"
	}
	return "unnamed"
}

// variants reads a cell of the event × state table: one action for any
// charge, or "new charge: A; known charge: B". The key is whether the
// charge was taken before.
func variants(cell string) map[bool]string {
	if !strings.Contains(cell, "new charge:") {
		a := code(cell)
		return map[bool]string{false: a, true: a}
	}
	out := map[bool]string{}
	for _, part := range strings.Split(cell, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), ":")
		out[strings.TrimSpace(k) == "known charge"] = code(v)
	}
	return out
}

// rows are the body rows of the table whose header starts with header,
// their cells trimmed.
func rows(t *testing.T, page, header string) [][]string {
	t.Helper()
	i := strings.Index(page, header)
	if i < 0 {
		t.Fatalf("docs/state-machine.md has no table %q", header)
	}
	var out [][]string
	for n, line := range strings.Split(page[i:], "\n") {
		if n < 2 {
			continue // the header and its rule
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		out = append(out, cells)
	}
	return out
}

var backticked = regexp.MustCompile("`([a-z_]+)`")

// code is a cell's one `name`, or its text when it has none (stale).
func code(cell string) string {
	if m := backticked.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	return strings.TrimSpace(cell)
}

// codes are every `name` in a cell.
func codes(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
