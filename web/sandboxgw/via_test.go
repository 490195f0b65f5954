package sandboxgw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// oneOrder opens the one order it holds, whatever the token.
type oneOrder struct{ o *models.Order }

func (f oneOrder) Open(context.Context, string, string, bool) (*models.Order, error) { return f.o, nil }

// The emulated page of a gateway (?via=xendit, as an invoice's
// invoice_url names it) pays in that gateway's format when the gateway
// speaks it — so the order is paid, and later refunded, through that
// gateway — and in the sandbox's otherwise.
func TestGatewaysPagePaysInItsFormat(t *testing.T) {
	t.Parallel()
	order := &models.Order{ID: "ORD-VIA", Status: models.OrderPending, TotalAmount: 1000, Currency: "IDR"}
	g := sandboxgw.New(oneOrder{order}, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	t.Cleanup(g.Close)
	format, err := gateways.NewSender(xendit.Name, "xnd-callback-token-via-0123")
	if err != nil {
		t.Fatal(err)
	}
	g.Speak(format)
	e := echo.New()
	g.Mount(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	for via, want := range map[string]string{"xendit": "xendit", "stripe": "sandbox", "": "sandbox", "nope": "sandbox"} {
		res, err := http.Get(srv.URL + "/sandbox/pay/ORD-VIA?t=tok&via=" + via)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("via %q: %d, %v", via, res.StatusCode, err)
		}
		pay := doc.Find(`form:has(input[name=outcome][value=paid]):has(input[name=return][value=order]) input[name=provider]`)
		if got, _ := pay.Attr("value"); pay.Length() != 1 || got != want {
			t.Errorf("via %q: the Pay button pays in %q (%d forms), want %q", via, got, pay.Length(), want)
		}
	}
}
