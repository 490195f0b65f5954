package payments_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// verifyCounter is a provider that counts the bodies it was asked to
// verify: what reached the first step that reads a body.
type verifyCounter struct {
	payments.Provider
	verified atomic.Int64
}

func (v *verifyCounter) Verify(h http.Header, body []byte, now time.Time) error {
	v.verified.Add(1)
	return v.Provider.Verify(h, body, now)
}

// A body nested deeper than MaxBodyDepth is refused 400 invalid_payload
// before any provider reads it (a gateway whose signature is inside the
// body decodes it in Verify, unauthenticated): 9,000 nested arrays, as signed as the sandbox signs,
// never reach Verify, and neither a callback nor a payment is written.
// A body at the limit is read as any other.
func TestDeepBodiesAreRefusedBeforeTheyAreRead(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	p := &verifyCounter{Provider: sandbox.NewProvider([][]byte{testenv.SandboxKey})}
	pay := payments.NewService(db, testenv.Logger(t), time.Now, metrics.New(), jobs.Tasks{}, p)
	t.Cleanup(pay.Close)
	send := func(body string) payments.Outcome {
		h := testenv.SandboxHeaders("evt_deep", []byte(body), time.Now())
		return pay.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name, Header: h,
			Body: strings.NewReader(body), ContentType: "application/json"})
	}
	deep := `{"a":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`
	out := send(deep)
	if out.Status() != 400 || out.Refusal != models.EInvalidPayload || !strings.Contains(out.Detail, "deep") {
		t.Errorf("9,000 levels: %d %s %q, want 400 invalid_payload", out.Status(), out.Word(), out.Detail)
	}
	if n := p.verified.Load(); n != 0 {
		t.Errorf("a body too deep was verified %d times: read before it was refused", n)
	}
	atLimit := `{"a":` + strings.Repeat("[", payments.MaxBodyDepth-1) + strings.Repeat("]", payments.MaxBodyDepth-1) + `}`
	if out := send(atLimit); out.Refusal == models.EInvalidPayload && strings.Contains(out.Detail, "deep") {
		t.Errorf("a body %d deep refused as too deep: %s", payments.MaxBodyDepth, out.Detail)
	}
	if n := p.verified.Load(); n != 1 {
		t.Errorf("a body at the limit verified %d times, want 1", n)
	}
	var callbacks int64
	db.Model(&models.PaymentCallback{}).Count(&callbacks)
	if callbacks != 0 {
		t.Errorf("%d callbacks written", callbacks)
	}
}
