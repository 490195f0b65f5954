package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// consoleActionsJS lists what on the page lets its reader act: a form
// that posts to the console (but log-out and the reader's own account,
// which a viewer may use), the refund form that leads to the page that
// asks first, an element that posts by htmx, and a link to a page that
// asks before an action.
const consoleActionsJS = `(() => {
	const own = p => p === "/admin/logout" || p === "/admin/account" || p.startsWith("/admin/account/");
	const asks = /\/(refund|cancel|apply-matching|rerun-matching|discard-matching)$/;
	const out = [];
	for (const f of document.querySelectorAll("form")) {
		const u = new URL(f.action, location.href);
		if (!u.pathname.startsWith("/admin") || own(u.pathname)) continue;
		if (f.method === "post" || asks.test(u.pathname)) out.push("form " + f.method + " " + u.pathname);
	}
	for (const e of document.querySelectorAll("[hx-post]")) out.push("hx-post " + e.getAttribute("hx-post"));
	for (const a of document.querySelectorAll("a[href]")) {
		const u = new URL(a.href, location.href);
		if (u.origin === location.origin && u.pathname.startsWith("/admin") && (asks.test(u.pathname) || u.hash === "#discard")) out.push("link " + u.pathname + u.hash);
	}
	return out;
})()`

// adminPageRoute finds the console's page routes in web/routes.go, the
// one list of routes.
var adminPageRoute = regexp.MustCompile(`e\.GET\("(/admin[^"]*)"`)

// TestBrowserViewerSeesNoActions: on every page of the console, listed
// from the routes, in a shop where each page has something to act on
// (a paid order with a refund waiting to be sent, a pending order, a
// refused delivery kept, a failed job, outbox rows, products), an
// operator sees at least one action where the page offers one, and a
// viewer sees none at all. The server's refusals are
// TestViewerIsRefusedEveryConsoleAction's (web).
func TestBrowserViewerSeesNoActions(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	_, env := gatewayEnv(t, "sandbox")
	env["ADMIN_API_TOKEN"] = "viewer-actions-admin-token-0123456789"
	a := startServe(t, env, "--roles=web") // no worker: the refund stays to be sent, the job failed
	if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
		t.Fatal(err)
	}
	paid := a.createOrder(t, map[string]int{"DEMO-MUG": 2})
	total := a.order(t, paid).TotalAmount
	if r := a.callback(t, "evt_viewer_paid", testenv.SandboxBody(paid, "tx-viewer-1", models.EventPaid, total)); r.Status != http.StatusOK {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	if r := a.do(t, "POST", "/api/admin/orders/"+paid+"/refunds", http.Header{
		"Authorization": {"Bearer " + env["ADMIN_API_TOKEN"]}, "Idempotency-Key": {randomKey()}, "Content-Type": {"application/json"},
	}, []byte(`{"amount":"75000","reason":"one cup arrived broken"}`)); r.Status != http.StatusAccepted {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	pending := a.createOrder(t, map[string]int{"DEMO-MUG": 1})
	if r := a.callback(t, "evt_viewer_wrong", testenv.SandboxBody(pending, "tx-viewer-2", models.EventPaid, 1000)); r.str("result") != "rejected" {
		t.Fatalf("a payment of the wrong amount: %d %s; want rejected", r.Status, r.Body)
	}
	rejected := a.count(t, "SELECT id FROM callback_deliveries WHERE outcome = 'rejected'")
	callback := a.count(t, "SELECT id FROM payment_callbacks WHERE idempotency_key = 'evt_viewer_paid'")
	failed := models.JobExecution{IdempotencyKey: "email:send:order_paid:" + paid, QueueName: "default", BusinessKey: "order_paid:" + paid,
		Status: models.JobFailed, Attempts: 3, StartedAt: time.Now(), LastError: "smtp: 554 service unavailable"}
	if err := a.DB.Create(&failed).Error; err != nil {
		t.Fatal(err)
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }

	// Every page route, and where it is seen with something to act on
	// ("" where the route is not a page of a logged-in reader).
	pages := map[string]struct {
		visit   string
		actions bool // an operator has something to do here
	}{
		"/admin":                           {"/admin", false},
		"/admin/callbacks":                 {"/admin/callbacks", false},
		"/admin/callbacks/:id":             {"/admin/callbacks/" + id(callback), false},
		"/admin/deliveries":                {"/admin/deliveries?outcome=rejected", true},
		"/admin/deliveries/apply-matching": {"/admin/deliveries/apply-matching?outcome=rejected", true},
		"/admin/deliveries/:id":            {"/admin/deliveries/" + id(rejected), true},
		"/admin/deliveries/:id/dry-run":    {"/admin/deliveries/" + id(rejected) + "/dry-run", false},
		"/admin/orders":                    {"/admin/orders", false},
		"/admin/orders/:id":                {"/admin/orders/" + paid, true},
		"/admin/orders/:id/cancel":         {"/admin/orders/" + pending + "/cancel", true},
		"/admin/orders/:id/refund":         {"/admin/orders/" + paid + "/refund?amount=1000&reason=a+chip", true},
		"/admin/jobs":                      {"/admin/jobs", true},
		"/admin/jobs/rerun-matching":       {"/admin/jobs/rerun-matching?status=failed", true},
		"/admin/jobs/discard-matching":     {"/admin/jobs/discard-matching?status=failed", true},
		"/admin/jobs/:key":                 {"/admin/jobs/" + url.PathEscape(failed.IdempotencyKey), true},
		"/admin/outbox":                    {"/admin/outbox", true},
		"/admin/products":                  {"/admin/products", true},
		"/admin/products/:sku":             {"/admin/products/DEMO-MUG", true},
		"/admin/audit":                     {"/admin/audit", true},
		"/admin/actions":                   {"/admin/actions", false},
		"/admin/catch-up":                  {"/admin/catch-up", true},
		"/admin/gateway-requests":          {"/admin/gateway-requests", true},
		"/admin/help":                      {"/admin/help", false},
		"/admin/account":                   {"/admin/account", false}, // the reader's own: a viewer may change it
		"/admin/admins":                    {"", false},               // an owner's alone: 403 to both
		"/admin/login":                     {"", false},
		"/admin/login/code":                {"", false},
		"/admin/invite/:token":             {"", false},
		"/admin/*":                         {"", false}, // the console's 404
	}
	src, err := os.ReadFile("../../web/routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, m := range adminPageRoute.FindAllStringSubmatch(string(src), -1) {
		if _, ok := pages[m[1]]; !ok {
			t.Errorf("the page route %s is not in this test's list: add where it has something to act on", m[1])
		}
		routes = append(routes, m[1])
	}
	if len(routes) < 25 {
		t.Fatalf("only %d console page routes found in web/routes.go", len(routes))
	}

	addAdmin(t, a, "operator@example.com", models.RoleOperator)
	addAdmin(t, a, "viewer@example.com", models.RoleViewer)
	operator, viewer := newBrowser(t, a), newBrowser(t, a)
	for who, b := range map[string]*browser{"operator@example.com": operator, "viewer@example.com": viewer} {
		if st := b.logIn(who, testAdminPassword); st != http.StatusOK {
			t.Fatalf("log-in of %s: %d", who, st)
		}
	}
	slices.Sort(routes)
	checked := 0
	for _, route := range routes {
		p := pages[route]
		if p.visit == "" {
			continue
		}
		if st := operator.open(p.visit); st != http.StatusOK {
			t.Fatalf("the operator's %s: %d", p.visit, st)
		}
		if got := browserEval[[]string](operator, "the operator's actions on "+p.visit, consoleActionsJS); p.actions && len(got) == 0 {
			t.Errorf("the operator sees no action on %s (%s): the page's data does not show what this test means to check", p.visit, route)
		}
		if st := viewer.open(p.visit); st != http.StatusOK {
			t.Fatalf("the viewer's %s: %d", p.visit, st)
		}
		if got := browserEval[[]string](viewer, "the viewer's actions on "+p.visit, consoleActionsJS); len(got) != 0 {
			t.Errorf("the viewer sees actions on %s: %q", p.visit, got)
		}
		checked++
	}
	t.Logf("%d console pages checked as an operator and as a viewer", checked)
}
