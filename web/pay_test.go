package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// payOnce presses Pay (POST /orders/{id}/pay?t=…) as the shop's form does.
func (c *console) payOnce(id, token string) page {
	return c.post("/orders/"+url.PathEscape(id)+"/pay?t="+url.QueryEscape(token), url.Values{})
}

// gatewayRequests are the order's gateway_requests rows.
func (c *console) gatewayRequests(id string) []models.GatewayRequest {
	c.t.Helper()
	var rows []models.GatewayRequest
	if err := c.db.Find(&rows, "order_id = ?", id).Error; err != nil {
		c.t.Fatal(err)
	}
	return rows
}

// Pay sends the customer to the configured gateway's page (the sandbox's
// here), asked for once: pressed again, the same page, and one
// gateway_requests row, done, keyed by the order id.
func TestPayOpensTheGatewaysPageOnce(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "PAY", 50000, 5)
	id, token := c.newShopOrder(t, "PAY")
	want := "/sandbox/pay/" + id + "?t=" + url.QueryEscape(token)
	for i := range 2 {
		if p := c.payOnce(id, token); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != want {
			t.Fatalf("press %d: %d to %q, want 303 to %q", i+1, p.StatusCode, p.Header.Get("Location"), want)
		}
	}
	// The stored page leaves the customer's token out: Sekali keeps it
	// hashed only.
	rows := c.gatewayRequests(id)
	if len(rows) != 1 || rows[0].Phase != models.GatewayDone || rows[0].Provider != "sandbox" || rows[0].IdempotencyKey != id ||
		rows[0].Attempts != 1 || rows[0].Kind != models.GatewayCreatePayment || rows[0].RedirectURL != "/sandbox/pay/"+id {
		t.Errorf("gateway requests %+v, want one done create_payment keyed by the order id, its page stored without the token", rows)
	}
	// Without the order's token there is nothing to pay; a closed order
	// goes back to its page.
	if p := c.payOnce(id, "wrong-token"); p.StatusCode != http.StatusNotFound {
		t.Errorf("a wrong token: %d, want 404", p.StatusCode)
	}
	if _, err := c.orders.Cancel(t.Context(), id, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	if p := c.payOnce(id, token); p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/orders/"+id+"?t=") {
		t.Errorf("a cancelled order: %d to %q, want 303 to its page", p.StatusCode, p.Header.Get("Location"))
	}
}

// Pay pressed ten times at once: ten redirects to one page, one row.
func TestPayPressedTenTimesAtOnce(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "PAY10", 50000, 5)
	id, token := c.newShopOrder(t, "PAY10")
	const n = 10
	locations := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			if p := c.payOnce(id, token); p.StatusCode == http.StatusSeeOther {
				locations[i] = p.Header.Get("Location")
			}
		})
	}
	close(start)
	wg.Wait()
	for i, loc := range locations {
		if loc == "" || loc != locations[0] {
			t.Errorf("press %d went to %q, want the one page %q", i+1, loc, locations[0])
		}
	}
	if rows := c.gatewayRequests(id); len(rows) != 1 || rows[0].Phase != models.GatewayDone || rows[0].Attempts != 1 {
		t.Errorf("gateway requests %+v, want one, done at the first attempt", rows)
	}
}

// The API's twin: POST /api/orders/{id}/payment with the order's token
// answers the provider and the page, the same one every time.
func TestPaymentAPI(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "PAYAPI", 50000, 5)
	id, token := c.newShopOrder(t, "PAYAPI")
	ask := func(bearer string) (int, map[string]string) {
		p := c.do(http.DefaultClient, "POST", "/api/orders/"+id+"/payment", nil, http.Header{"Authorization": {"Bearer " + bearer}})
		var v map[string]string
		json.Unmarshal([]byte(p.Body), &v)
		return p.StatusCode, v
	}
	status, first := ask(token)
	if status != 200 || first["provider"] != "sandbox" || first["redirect_url"] != c.URL+"/sandbox/pay/"+id+"?t="+url.QueryEscape(token) {
		t.Fatalf("first: %d %v, want 200 with the sandbox's page", status, first)
	}
	if status, again := ask(token); status != 200 || again["redirect_url"] != first["redirect_url"] {
		t.Errorf("again: %d %v, want the same redirect_url %q", status, again, first["redirect_url"])
	}
	if status, _ := ask("not-the-token"); status != 404 {
		t.Errorf("another token: %d, want 404", status)
	}
	if rows := c.gatewayRequests(id); len(rows) != 1 {
		t.Errorf("%d gateway requests, want 1", len(rows))
	}
}

// The page's return URL — where the gateway sends the customer back — is
// built from PUBLIC_URL when it is set, whatever host the request came
// through (a repeat under another host name must send the gateway the
// same request); without it, from the request's own host, and only as
// http or https.
func TestPayReturnURLFromPublicURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, publicURL string
		proto           string // X-Forwarded-Proto
		base            string // the return URL's scheme://host
	}{
		{"PUBLIC_URL", "https://shop.example.com", "", "https://shop.example.com"},
		{"the request's host", "", "", "http://shop-b.internal"},
		{"the request's host, https", "", "https", "https://shop-b.internal"},
		{"the request's host, a scheme that is no web page's", "", "javascript", "http://shop-b.internal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newConsole(t, func(cfg *config.Config) { cfg.PublicURL = tt.publicURL })
			testenv.MustCreateProduct(t, c.db, "PAYURL", 50000, 5)
			id, token := c.newShopOrder(t, "PAYURL")
			p := c.do(http.DefaultClient, "POST", "/api/orders/"+id+"/payment", nil,
				http.Header{"Authorization": {"Bearer " + token}, "Host": {"shop-b.internal"}, "X-Forwarded-Proto": {tt.proto}})
			var got map[string]string
			if err := json.Unmarshal([]byte(p.Body), &got); err != nil || p.StatusCode != http.StatusOK {
				t.Fatalf("payment: %d %s", p.StatusCode, p.Body)
			}
			base := tt.base
			asked := c.pages.asked()
			if want := base + "/orders/" + id + "?t=" + url.QueryEscape(token); len(asked) != 1 || asked[0].ReturnURL != want {
				t.Errorf("pages asked for %+v, want one returning to %q", asked, want)
			}
			if want := base + "/sandbox/pay/" + id + "?t=" + url.QueryEscape(token); got["redirect_url"] != want {
				t.Errorf("redirect_url %q, want %q", got["redirect_url"], want)
			}
		})
	}
}

// The page lists the items under the names they were sold under: a
// product renamed after the order does not change what Pay asks the
// gateway (a repeat of the call must be the same request), and the
// order's JSON and the shop's page show the name sold too.
func TestPayNamesTheItemsAsSold(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "PAYNAME", 50000, 5)
	id, token := c.newShopOrder(t, "PAYNAME")
	var sold string
	if err := c.db.Raw("SELECT name FROM products WHERE sku = 'PAYNAME'").Scan(&sold).Error; err != nil || sold == "" {
		t.Fatalf("the product's name: %q, %v", sold, err)
	}
	if err := c.db.Exec("UPDATE products SET name = 'Renamed mug' WHERE sku = 'PAYNAME'").Error; err != nil {
		t.Fatal(err)
	}
	if p := c.payOnce(id, token); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("Pay: %d", p.StatusCode)
	}
	if asked := c.pages.asked(); len(asked) != 1 || len(asked[0].Items) != 1 || asked[0].Items[0].Name != sold {
		t.Errorf("page requests %+v; want one, its item named %q", asked, sold)
	}
	p := c.do(http.DefaultClient, "GET", "/api/orders/"+id, nil, http.Header{"Authorization": {"Bearer " + token}})
	var o struct {
		Items []struct{ Name string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(p.Body), &o); err != nil || len(o.Items) != 1 || o.Items[0].Name != sold {
		t.Errorf("GET /api/orders/%s: %d %s; want the item named %q", id, p.StatusCode, p.Body, sold)
	}
	if shop := c.get("/orders/" + id + "?t=" + url.QueryEscape(token)); !strings.Contains(shop.Body, sold) || strings.Contains(shop.Body, "Renamed mug") {
		t.Errorf("the shop's order page does not name the item %q as sold", sold)
	}
}

// The console's order page shows the calls made to the gateway, and its
// JSON lists them.
func TestOrderPageShowsGatewayCalls(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "PAYSEE", 50000, 5)
	id, token := c.newShopOrder(t, "PAYSEE")
	if p := c.payOnce(id, token); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("pay: %d", p.StatusCode)
	}
	row := c.get("/admin/orders/" + id).Doc(t).Find("h2:contains('Calls to the gateway') + .table-wrap tbody tr")
	if text := row.Text(); row.Length() != 1 || !strings.Contains(text, "sandbox: create_payment") || !strings.Contains(text, id) ||
		row.Find(".badge").Text() != "done" {
		t.Errorf("the order page's gateway calls: %d rows %q, want one done sandbox create_payment", row.Length(), text)
	}
	p := c.do(c.client, "GET", "/admin/orders/"+id, nil, http.Header{"Accept": {"application/json"}})
	var v struct {
		GatewayRequests []struct {
			Provider       string `json:"provider"`
			Phase          string `json:"phase"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"gateway_requests"`
	}
	if err := json.Unmarshal([]byte(p.Body), &v); err != nil || len(v.GatewayRequests) != 1 || v.GatewayRequests[0].Phase != "done" ||
		v.GatewayRequests[0].IdempotencyKey != id {
		t.Errorf("the order's JSON lists %+v (%v), want the one done request", v.GatewayRequests, err)
	}
}

// The console lists the calls made to gateways; ?phase=open keeps those
// not over (a sent one shows its answer as unknown), and the list is
// JSON too.
func TestGatewayRequestsPage(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "GWLIST", 50000, 5)
	paid, token := c.newShopOrder(t, "GWLIST")
	if p := c.payOnce(paid, token); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("pay: %d", p.StatusCode)
	}
	stuck, _ := c.newShopOrder(t, "GWLIST")
	if err := c.db.Create(&models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: stuck, Provider: "acmepay",
		IdempotencyKey: stuck, Amount: 50000, Currency: "IDR", Phase: models.GatewaySent, Attempts: 1,
		LastError: "context deadline exceeded"}).Error; err != nil {
		t.Fatal(err)
	}
	rows := c.get("/admin/gateway-requests?phase=open").Doc(t).Find("#list tbody tr")
	if rows.Length() != 1 || !strings.Contains(rows.Text(), stuck) || rows.Find(".badge").Text() != "sent, answer unknown" ||
		!strings.Contains(rows.Text(), "context deadline exceeded") {
		t.Errorf("open calls: %d rows %q, want the stuck one, its answer unknown", rows.Length(), rows.Text())
	}
	if all := c.get("/admin/gateway-requests").Doc(t).Find("#list tbody tr"); all.Length() != 2 {
		t.Errorf("all calls: %d rows, want 2", all.Length())
	}
	var v struct {
		Rows []struct {
			OrderID string `json:"order_id"`
			Phase   string `json:"phase"`
		} `json:"rows"`
	}
	api := c.api("/api/admin/gateway-requests?phase=done")
	if err := json.Unmarshal([]byte(api.Body), &v); err != nil || len(v.Rows) != 1 || v.Rows[0].OrderID != paid || v.Rows[0].Phase != "done" {
		t.Errorf("the API's done calls: %d %s", api.StatusCode, api.Body)
	}
	if p := c.get("/admin/gateway-requests?phase=lost"); p.StatusCode != 422 {
		t.Errorf("a bad phase: %d, want 422", p.StatusCode)
	}
}
