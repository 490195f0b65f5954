package sandboxgw_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// stubSender speaks a format named provider as far as the sandbox
// gateway needs: a body of every fact but a failure (unless fails), the
// fact in JSON, signed by nobody. The real senders are tested with their
// gateways (app/gateways/...).
type stubSender struct {
	provider string
	fails    bool // it can say failed
}

func (s stubSender) Provider() string { return s.provider }

func (s stubSender) Body(f payments.Fact) ([]byte, error) {
	if f.Status == models.EventFailed && !s.fails {
		return nil, payments.ErrNotExpressible
	}
	return json.Marshal(f)
}

func (stubSender) Sign(body []byte, eventID string, _ time.Time) (http.Header, []byte, error) {
	return http.Header{"Content-Type": {"application/json"}, "Stub-Event": {eventID}}, body, nil
}

// The emulated page of each gateway of the registry (?via={name}, as the
// page its emulated API made names it) pays in that gateway's format
// when the sandbox gateway speaks it — so the order is paid, and later
// refunded, through that gateway — and in the sandbox's otherwise. The
// page is named by the gateway it emulates, and says so when it cannot
// pay in its format (the variable of the gateway's secret is unset). A
// page via no gateway, or one not in the registry, is the sandbox's own.
func TestGatewaysPagePaysInItsFormat(t *testing.T) {
	t.Parallel()
	type want struct{ format, brand, warning string }
	check := func(t *testing.T, base, via string, w want) {
		t.Helper()
		res, err := http.Get(base + "/sandbox/pay/ORD-VIA?t=tok&via=" + via)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("via %q: %d, %v", via, res.StatusCode, err)
		}
		pay := doc.Find(`form:has(input[name=outcome][value=paid]):has(input[name=return][value=order]) input[name=provider]`)
		if got, _ := pay.Attr("value"); pay.Length() != 1 || got != w.format {
			t.Errorf("via %q: the Pay button pays in %q (%d forms), want %q", via, got, pay.Length(), w.format)
		}
		if got := strings.TrimSpace(doc.Find(".gateway-brand").Contents().First().Text()); got != w.brand {
			t.Errorf("via %q: the page is named %q, want %q", via, got, w.brand)
		}
		warning := doc.Find(".gateway-card .flash.warn").Text()
		if w.warning == "" && warning != "" || !strings.Contains(warning, w.warning) {
			t.Errorf("via %q: warning %q, want one naming %q", via, warning, w.warning)
		}
	}
	order := &models.Order{ID: "ORD-VIA", Status: models.OrderPending, TotalAmount: 1000, Currency: "IDR"}
	serve := func(t *testing.T, speaks ...string) string {
		g := sandboxgw.New(sandboxgwtest.OneOrder{Order: order}, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
		for _, name := range speaks {
			g.Speak(stubSender{provider: name})
		}
		return sandboxgwtest.Serve(t, g)
	}
	own := serve(t)
	for _, via := range []string{"", "nope", gateways.All[0].Name} {
		check(t, own, via, want{"sandbox", "Sandbox Pay", ""})
	}
	for _, e := range gateways.All[1:] {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			brand := strings.ToUpper(e.Name[:1]) + e.Name[1:] + " (emulated)"
			check(t, serve(t, e.Name), e.Name, want{e.Name, brand, ""})
			check(t, own, e.Name, want{"sandbox", brand, e.SecretVariable})
		})
	}
}
