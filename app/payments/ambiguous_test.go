package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// gatewayProviders are the receiving adapters these tests send to: the
// sandbox's. Every other gateway's package sends its own notifications
// through the pipeline (gatewaytest.Pipeline), so that deleting it
// deletes its tests with it.
func gatewayProviders(t *testing.T) []payments.Provider {
	t.Helper()
	return []payments.Provider{sandbox.NewProvider([][]byte{testenv.SandboxKey})}
}

// gatewayFixture is the pipeline with those providers, on a fresh
// database.
func gatewayFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, gatewayProviders(t)...)
	t.Cleanup(pay.Close)
	return &fixture{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay}
}

// delivery is one HTTP delivery to a provider.
type delivery struct {
	provider string
	header   http.Header
	body     []byte
}

// kit is d as gatewaytest's checks send it.
func (d delivery) kit() gatewaytest.Delivery {
	return gatewaytest.Delivery{Provider: d.provider, Header: d.header, Body: d.body}
}

// fromKit is d as these tests send it.
func fromKit(d gatewaytest.Delivery) delivery {
	return delivery{provider: d.Provider, header: d.Header, body: d.Body}
}

func (f *fixture) send(d delivery) payments.Outcome {
	f.t.Helper()
	h := d.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return f.pay.Receive(context.Background(), payments.Delivery{Provider: d.provider, Header: h, Body: bytesReader(d.body), ContentType: "application/json"})
}

// A body two parsers could read differently is refused before anything
// is written: keys equal but for case (encoding/json would fill one field
// from either, the last one winning) are a 400. (Each gateway's package
// checks its own, such as a number sent in quotes or a body nested
// inside the event.)
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	// after writes extra right after the member member of body: a key
	// encoding/json cannot write beside its case variant.
	after := func(body []byte, member, extra string) []byte {
		if !strings.Contains(string(body), member) {
			t.Fatalf("no %s in %s", member, body)
		}
		return []byte(strings.Replace(string(body), member, member+extra, 1))
	}
	sbx := testenv.SandboxBody(id, "tx-case-sbx-"+id, models.EventPaid, price)
	sbx = after(sbx, `"payment_status":"paid"`, `,"PAYMENT_STATUS":"expired"`)
	for _, tc := range []struct {
		name string
		d    delivery
	}{
		{"sandbox", delivery{provider: sandbox.Name, header: testenv.SandboxHeaders("evt_case_"+id, sbx, time.Now()), body: sbx}},
	} {
		if !json.Valid(tc.d.body) {
			t.Fatalf("%s: not JSON: %s", tc.name, tc.d.body)
		}
		if out := f.send(tc.d); out.Status() != 400 || out.Refusal != models.EInvalidPayload {
			t.Errorf("%s with keys equal but for case: %d %s (%s), want 400 invalid_payload\n%s", tc.name, out.Status(), out.Result, out.Detail, tc.d.body)
		}
	}
	var callbacks int64
	f.db.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Count(&callbacks)
	if callbacks != 0 {
		t.Errorf("%d callbacks recorded from refused bodies", callbacks)
	}
}
