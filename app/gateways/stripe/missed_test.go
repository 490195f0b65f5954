package stripe_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// The emulation's GET /v1/events lists the events the sandbox gateway
// sent in Stripe's format, and delivery_success=false those it could not
// deliver: of two orders paid, one while the notifications are lost,
// Missed (the catch-up's request) returns only the lost one's event, as
// it was signed and would have been delivered; and the delivered one is
// listed with delivery_success=true.
func TestEmulatorListsUndeliveredEvents(t *testing.T) {
	t.Parallel()
	callbacks := sandboxgwtest.RecordCallbacks(t)
	g := sandboxgwtest.New(t, callbacks.URL)
	g.Speak(sandboxgwtest.Must(stripe.NewSender("whsec_missed_0123456789")))
	g.Emulate(stripe.NewEmulator(emulatorKey))
	base := sandboxgwtest.Serve(t, g)
	since := time.Now().Add(-time.Minute)

	pay := func(id string) {
		o := &models.Order{ID: id, TotalAmount: 150000, Currency: "IDR"}
		plan, err := g.ParsePlan(string(models.EventPaid), "1", sandboxgw.ModeSequential, stripe.Name)
		if err != nil {
			t.Fatal(err)
		}
		g.Start(o, plan)
		testenv.Eventually(t, id+"'s notification to be answered or lost", func() bool {
			ds := g.Deliveries(id)
			return len(ds) == 1 && (ds[0].Status == 200 || ds[0].Result == "lost")
		})
	}
	pay("ORD-DELIVERED")
	g.Faults().LoseNotifications(true)
	pay("ORD-LOST")

	sc, err := stripe.NewStatusClient(emulatorKey, base+stripe.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	bodies, pages, err := sc.Missed(t.Context(), since)
	if err != nil || pages != 1 || len(bodies) != 1 {
		t.Fatalf("Missed: %d bodies in %d pages, %v; want the lost event alone, in one page", len(bodies), pages, err)
	}
	var lost struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Object struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(bodies[0], &lost); err != nil || lost.Type != "payment_intent.succeeded" ||
		lost.Data.Object.Metadata["order_id"] != "ORD-LOST" {
		t.Errorf("the listed event: %s (%v), want ORD-LOST's payment_intent.succeeded", bodies[0], err)
	}
	if later, _, err := sc.Missed(t.Context(), time.Now().Add(time.Minute)); err != nil || len(later) != 0 {
		t.Errorf("Missed since a minute ahead: %d bodies, %v; want none (created[gte])", len(later), err)
	}
	var delivered struct {
		Data []json.RawMessage `json:"data"`
	}
	code, body, err := httpjson.Get(t.Context(), http.DefaultClient, base+stripe.EmulatorPath+"/v1/events?delivery_success=true", emulatorKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &delivered); err != nil || code != 200 || len(delivered.Data) != 1 ||
		len(callbacks.Received()) != 1 || string(delivered.Data[0]) != string(callbacks.Received()[0].Body) {
		t.Errorf("delivery_success=true: %d %s; want the one delivered event, as delivered", code, body)
	}
}
