package stripe_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// told tells em of the notification of f as Sekali's Stripe sender
// writes it, as the sandbox gateway tells its emulations before it
// sends one (or loses it).
func told(t *testing.T, em *stripe.Emulator, f payments.Fact) []byte {
	t.Helper()
	body, err := mustSender(t, secret).Body(f)
	if err != nil {
		t.Fatal(err)
	}
	em.Notified(f, body)
	return body
}

func intentFact(orderID, pi string, status models.PaymentEvent, amount int64) payments.Fact {
	return payments.Fact{EventID: "evt_" + pi + "_" + string(status), OrderID: orderID, TransactionID: pi, Status: status,
		Amount: amount, Currency: "IDR"}
}

// searched are the ids of the PaymentIntents query finds, every page of
// limit, as stripe-go pages a search (next_page); or the error.
func searched(t *testing.T, sc *stripego.Client, query string, limit int64) ([]string, error) {
	t.Helper()
	var ids []string
	p := &stripego.PaymentIntentSearchParams{SearchParams: stripego.SearchParams{Query: query, Limit: stripego.Int64(limit)}}
	for pi, err := range sc.V1PaymentIntents.Search(t.Context(), p) {
		if err != nil {
			return ids, err
		}
		ids = append(ids, pi.ID)
	}
	return ids, nil
}

// The emulation's search finds the PaymentIntents its events told of,
// in Stripe's query language, as stripe-go asks and pages it: by
// metadata (the status poll's query, with a quote escaped), status,
// currency, amount, negated, null, joined by AND or OR; newest first.
// A PaymentIntent told twice (declined, then paid) is one, in its last
// state. A query Stripe would refuse is its 400.
func TestStripeEmulatedSearch(t *testing.T) {
	t.Parallel()
	em := stripe.NewEmulator(emulatorKey)
	x := gatewaytest.Emulate(t, em)
	sc := stripeClient(t, x.Base, emulatorKey)
	told(t, em, intentFact("ORD-A", "pi_a", models.EventPaid, 50000))
	told(t, em, intentFact("ORD-B", "pi_b", models.EventDeclined, 70000))
	told(t, em, intentFact("ORD-B", "pi_b", models.EventPaid, 70000))
	told(t, em, intentFact("ORD-C", "pi_c", models.EventDeclined, 20000))
	told(t, em, intentFact("O'Brien", "pi_q", models.EventFailed, 10000))

	found := map[string][]string{
		`metadata['order_id']:'ORD-A'`:                                 {"pi_a"},
		`metadata["order_id"]:"ord-b"`:                                 {"pi_b"}, // exact, but not by case
		`metadata['order_id']:'O\'Brien'`:                              {"pi_q"},
		`metadata['order_id']:'ORD-'`:                                  nil,
		`metadata['order_id']:'ORD-NONE'`:                              nil,
		`metadata['other']:null`:                                       {"pi_q", "pi_c", "pi_b", "pi_a"},
		`status:'succeeded'`:                                           {"pi_b", "pi_a"},
		`status:SUCCEEDED`:                                             {"pi_b", "pi_a"},
		`-status:'succeeded' AND currency:'idr'`:                       {"pi_q", "pi_c"},
		`metadata['order_id']:'ORD-A' OR metadata['order_id']:'ORD-C'`: {"pi_c", "pi_a"},
		`status:'succeeded' metadata['order_id']:'ORD-A'`:              {"pi_a"},
		`amount>5000000`:                                               {"pi_b"},
		`amount>=5000000 and amount<7000000`:                           {"pi_a"},
		`created>0 AND status:"canceled"`:                              {"pi_q"},
	}
	for query, want := range found {
		for _, limit := range []int64{1, 10} {
			got, err := searched(t, sc, query, limit)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s (pages of %d): %v, %v; want %v", query, limit, got, err, want)
			}
		}
	}
	var b *stripego.PaymentIntent
	for pi, err := range sc.V1PaymentIntents.Search(t.Context(), &stripego.PaymentIntentSearchParams{SearchParams: stripego.SearchParams{
		Query: `metadata['order_id']:'ORD-B'`}}) {
		if err != nil || b != nil {
			t.Fatalf("ORD-B: %v, %v; want one PaymentIntent", pi, err)
		}
		b = pi
	}
	if b == nil || b.Status != stripego.PaymentIntentStatusSucceeded || b.Amount != 7000000 || b.AmountReceived != 7000000 ||
		b.Currency != "idr" || b.Metadata["order_id"] != "ORD-B" || b.Created == 0 || b.LatestCharge == nil || b.LatestCharge.ID != "ch_pi_b" {
		t.Errorf("ORD-B's PaymentIntent: %+v", b)
	}

	for _, query := range []string{
		``, `status`, `stauts:'succeeded'`, `status>'a'`, `amount:'lots'`, `metadata:'x'`,
		`metadata['order_id']:'ORD-A`, `status:'succeeded' AND currency:'idr' OR amount>1`,
		strings.Repeat(`amount>1 `, 11),
	} {
		_, err := searched(t, sc, query, 10)
		if se := stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest); se.Param != "query" {
			t.Errorf("%q: param %q, want query", query, se.Param)
		}
	}
	_, err := searched(t, stripeClient(t, x.Base, "sk_test_wrong_0123456789"), `status:'succeeded'`, 10)
	stripeErr(t, err, http.StatusUnauthorized, stripego.ErrorTypeInvalidRequest)
}

// The search's answer has the shape Stripe's OpenAPI spec (the one
// stripe-mock, a tool of this module, is built from) gives
// /v1/payment_intents/search: a search_result of PaymentIntents, each
// member one the spec names, of the type it says; next_page and
// total_count too.
func TestStripeEmulatedSearchHasTheSpecsShape(t *testing.T) {
	t.Parallel()
	em := stripe.NewEmulator(emulatorKey)
	x := gatewaytest.Emulate(t, em)
	told(t, em, intentFact("ORD-S1", "pi_s1", models.EventPaid, 50000))
	told(t, em, intentFact("ORD-S2", "pi_s2", models.EventDeclined, 50000))
	spec := openAPISpec(t)
	schemas := spec["components"].(map[string]any)["schemas"].(map[string]any)
	op := spec["paths"].(map[string]any)["/v1/payment_intents/search"].(map[string]any)["get"].(map[string]any)
	result := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)

	q := url.Values{"query": {`currency:'idr'`}, "limit": {"1"}, "expand[]": {"total_count"}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, x.URL+"/v1/payment_intents/search?"+q.Encode(), nil)
	req.SetBasicAuth(emulatorKey, "")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%d, %v", res.StatusCode, err)
	}
	if answer["next_page"] == nil || answer["total_count"] != float64(2) || len(answer["data"].([]any)) != 1 {
		t.Errorf("a first page of one of two: %v", answer)
	}
	conforms(t, "search_result", answer, result, schemas)
}

// openAPISpec is Stripe's OpenAPI spec as stripe-mock embeds it.
func openAPISpec(t *testing.T) map[string]any {
	t.Helper()
	dir, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "github.com/stripe/stripe-mock").Output()
	if err != nil {
		t.Fatalf("go list stripe-mock: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "embedded", "openapi", "spec3.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// conforms checks v against schema s: its required members there, and
// every member one s names, of its type (into $ref, anyOf and arrays);
// null only where s is nullable.
func conforms(t *testing.T, path string, v any, s map[string]any, schemas map[string]any) {
	t.Helper()
	if ref, ok := s["$ref"].(string); ok {
		s = schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	if v == nil {
		if s["nullable"] != true {
			t.Errorf("%s: null, not nullable in the spec", path)
		}
		return
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		for _, alt := range anyOf { // the first alternative of v's JSON type
			if a := alt.(map[string]any); jsonType(v) == a["type"] || (a["$ref"] != nil && jsonType(v) == "object") {
				conforms(t, path, v, a, schemas)
				return
			}
		}
		t.Errorf("%s: %T is none of the spec's alternatives", path, v)
		return
	}
	if want, ok := s["type"].(string); ok && want != jsonType(v) && (want != "number" || jsonType(v) != "integer") {
		t.Errorf("%s: a %s, the spec says %s", path, jsonType(v), want)
		return
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		for _, r := range required {
			if _, ok := v[r.(string)]; !ok {
				t.Errorf("%s: no %s, which the spec requires", path, r)
			}
		}
		for k, member := range v {
			if p, ok := props[k].(map[string]any); ok {
				conforms(t, path+"."+k, member, p, schemas)
			} else if extra, ok := s["additionalProperties"].(map[string]any); ok {
				conforms(t, path+"."+k, member, extra, schemas)
			} else {
				t.Errorf("%s: %s is not in the spec", path, k)
			}
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for i, item := range v {
			conforms(t, fmt.Sprintf("%s[%d]", path, i), item, items, schemas)
		}
	}
}

func jsonType(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	}
	return "null"
}

// The status poll against the emulation, as with the README's Stripe
// set-up (STRIPE_API_URL pointed at the sandbox): an order whose
// payment_intent.succeeded was lost is found by the search, its event
// among GET /v1/events, and paid under the event's own id, so the
// notification arriving after all is a duplicate. An order whose
// PaymentIntent was declined, and one Stripe never heard of, stay
// pending.
func TestStripePollAgainstTheEmulation(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	em := stripe.NewEmulator(emulatorKey)
	x := gatewaytest.EmulateSending(t, em, mustSender(t, secret))
	paidOrder, _ := p.Order()
	declined, _ := p.Order()
	unknown, _ := p.Order()
	x.Paid(paidOrder, "pi_poll_paid", price, "IDR") // told, as the sandbox does, and never delivered
	told(t, em, intentFact(declined, "pi_poll_declined", models.EventDeclined, price))

	client, err := stripe.NewStatusClient(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := p.Pay.Poll(t.Context(), []payments.StatusClient{client}, 2*time.Hour) // every order of the test
	if err != nil || applied != 1 {
		t.Fatalf("poll: %d applied, %v; want the one payment", applied, err)
	}
	for id, want := range map[string]models.OrderStatus{paidOrder: models.OrderPaid, declined: models.OrderPending, unknown: models.OrderPending} {
		var o models.Order
		if err := p.DB.Take(&o, "id = ?", id).Error; err != nil || o.Status != want {
			t.Errorf("order %s: %s, %v; want %s", id, o.Status, err, want)
		}
	}
	late, err := mustSender(t, secret).Body(payments.Fact{EventID: "evt_paid_pi_poll_paid", OrderID: paidOrder,
		TransactionID: "pi_poll_paid", Status: models.EventPaid, Amount: price, Currency: "IDR"}) // x.Paid's
	if err != nil {
		t.Fatal(err)
	}
	if out := p.Send(signed(late, secret)); out.Result != models.ResultDuplicate {
		t.Errorf("the lost notification after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}
	if n := p.Callbacks(paidOrder); n != 1 {
		t.Errorf("%d callbacks of the paid order, want 1", n)
	}
}
