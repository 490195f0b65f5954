package web_test

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/alexedwards/scs/postgresstore"
	"github.com/hibiken/asynq"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/catchup"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/janitor"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web"
	"github.com/sekali/sekali/web/sandboxgw"
)

// Test admin credentials and API token.
const (
	adminEmail    = "admin@example.com"
	adminPassword = "correct horse battery"
	apiToken      = "test-admin-token"
)

// console is the whole web server, as serve wires it, on a fresh database
// and a private Redis, behind a real HTTP listener; client keeps the
// session cookie like a browser and never follows redirects, so tests see
// them.
type console struct {
	t        *testing.T
	URL      string
	db       *gorm.DB
	orders   *orders.Service
	payments *payments.Service
	client   *http.Client
	pages    *recordingOpener // what Pay asked the gateway for
	srv      *web.Server
	gateway  *sandboxgw.Sandbox // the sandbox gateway, with its fault switches
}

// recordingOpener is the sandbox gateway's page opener, keeping each
// page request.
type recordingOpener struct {
	gatewaycalls.PageOpener
	mu       sync.Mutex
	requests []gatewaycalls.PageRequest
}

func (r *recordingOpener) OpenPage(ctx context.Context, req gatewaycalls.PageRequest) (gatewaycalls.Page, error) {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	return r.PageOpener.OpenPage(ctx, req)
}

// asked are the page requests made so far.
func (r *recordingOpener) asked() []gatewaycalls.PageRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// midtransKey is the console's Midtrans server key: Midtrans is
// configured beside the sandbox, so the payment page can speak its format.
const midtransKey = "SB-Mid-server-CONSOLE0123456789"

func newConsole(t *testing.T, configure ...func(*config.Config)) *console {
	t.Helper()
	return newConsoleWithDB(t, testenv.NewDB(t), configure...)
}

// newConsoleWithDB is newConsole on the database db: two of them on one
// database are two web processes.
func newConsoleWithDB(t *testing.T, db *gorm.DB, configure ...func(*config.Config)) *console {
	t.Helper()
	rdb := testenv.NewRedis(t)
	log := testenv.Logger(t)
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.SandboxKeys = [][]byte{testenv.SandboxKey}
	cfg.AdminAPIToken = apiToken
	cfg.CookieSecure = false // the test server speaks plain HTTP on 127.0.0.1
	// A request may take as long as the test may: on a machine running
	// other work, a log-in (bcrypt, the throttle's rows) can take seconds.
	cfg.RequestTimeout = testenv.Budget(t)
	for _, f := range configure {
		f(&cfg)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})
	// The listener first: the sandbox gateway sends its callbacks to it,
	// and answers there as Midtrans's status API.
	var handler http.Handler
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	midtransProvider, err := midtrans.NewProvider(midtransKey, "http://"+hs.Listener.Addr().String()+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	metricSet := metrics.New() // one per server, as serve builds it
	paymentService := payments.NewService(db, log, time.Now, metricSet, jobs.Tasks{}, sandbox.NewProvider(cfg.SandboxKeys), midtransProvider)
	paymentService.KeepBodies = cfg.DeliveryBodyRetention > 0 // as serve.go sets it
	t.Cleanup(paymentService.Close)
	queue := asynq.NewClientFromRedisClient(rdb)
	gateway := sandboxgw.New(orderService, testenv.SandboxKey, "http://"+hs.Listener.Addr().String(), log)
	gateway.Retries = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}
	midtransFormat, err := gateways.NewSender(midtrans.Name, midtransKey)
	if err != nil {
		t.Fatal(err)
	}
	gateway.Speak(midtransFormat)                      // the QA panel can send Midtrans's format too
	gateway.Emulate(midtrans.NewEmulator(midtransKey)) // and the gateway answers as Midtrans's status API
	t.Cleanup(gateway.Close)
	pages := &recordingOpener{PageOpener: gateway}
	refundService := refunds.NewService(db, log, time.Now, metricSet, paymentService, jobs.Tasks{}, gateway)
	refundService.ApprovalAbove = cfg.RefundApprovalAbove // as serve.go sets them
	refundService.ApprovalWindow = cfg.RefundApprovalWindow
	srv := web.NewServer(log, cfg, web.Deps{
		Orders:      orderService,
		Payments:    paymentService,
		Keys:        idempotency.New(db, time.Now, cfg.RequestTimeout),
		Products:    catalog.NewService(db),
		Audit:       audit.New(db).RaisingAlerts(jobs.Tasks{}),
		Admins:      admins.NewService(db, time.Now).Notifying(jobs.Tasks{}),
		Sessions:    web.NewSessions(postgresstore.NewWithCleanupInterval(sqlDB, 0), cfg),
		Stories:     story.New(db, jobs.Tasks{}),
		Stats:       stats.NewReader(db, time.Now),
		Jobs:        jobs.NewConsole(db, asynq.NewInspectorFromRedisClient(rdb), queue, time.Hour, metrics.New()),
		PaymentPage: gateway,
		Checkout:    gatewaycalls.NewPages(db, pages, log, time.Now, metricSet),
		// Refunds of the sandbox's charges. No worker runs here: a refund
		// stays planned, its refund:send job written to the outbox.
		Refunds: refundService,
		Calls:   gatewaycalls.NewLedger(db, time.Now, metricSet),
		Janitor: janitor.New(db, log, time.Now, metricSet, refundService, gateways.Schedules(), gateway),
		CatchUp: catchup.New(db, log, time.Now, paymentService, nil, nil, jobs.Tasks{}),
		Alerts:  alerts.NewAcks(db, time.Now),
	})
	handler = srv
	hs.Start()
	t.Cleanup(hs.Close)
	ensureAdmin(t, db)
	c := &console{t: t, URL: hs.URL, db: db, orders: orderService, payments: paymentService, pages: pages, gateway: gateway, srv: srv}
	c.client = c.newClient()
	return c
}

// ensureAdmin creates the test admin, hashed at bcrypt's lowest cost:
// the race detector makes the production cost take a second per log-in.
func ensureAdmin(t *testing.T, db *gorm.DB) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(adminPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Clauses(clause.OnConflict{DoNothing: true}).Create(&models.AdminUser{Email: adminEmail, PasswordHash: string(hash)}).Error
	if err != nil {
		t.Fatal(err)
	}
}

// newClient is a browser-like client: a cookie jar, redirects not followed.
func (c *console) newClient() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return &http.Client{
		Jar:           jar,
		Timeout:       testenv.Budget(c.t),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// page is an answer with its body read.
type page struct {
	*http.Response
	Body string
}

// Doc parses the body as HTML.
func (p page) Doc(t *testing.T) *goquery.Document {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(p.Body))
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// do sends a request as a browser on the same origin would.
func (c *console) do(client *http.Client, method, path string, body io.Reader, header http.Header) page {
	c.t.Helper()
	req, err := http.NewRequest(method, c.URL+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Host = cmp.Or(header.Get("Host"), req.Host) // the client sends req.Host, never a Host header
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return page{Response: resp, Body: string(b)}
}

func (c *console) get(path string) page { return c.do(c.client, "GET", path, nil, nil) }

// post sends a form from the console's own pages.
func (c *console) post(path string, form url.Values) page {
	return c.do(c.client, "POST", path, strings.NewReader(form.Encode()), http.Header{
		"Content-Type":   {"application/x-www-form-urlencoded"},
		"Sec-Fetch-Site": {"same-origin"},
		"Origin":         {c.URL},
	})
}

// login logs the console's client in.
func (c *console) login() {
	c.t.Helper()
	p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin" {
		c.t.Fatalf("log-in: %d Location=%q\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
}

// loginAs is the console seen by a new admin of role: its own client,
// logged in.
func (c *console) loginAs(email string, role models.AdminRole) *console {
	c.t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(adminPassword), bcrypt.MinCost)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.db.Create(&models.AdminUser{Email: email, PasswordHash: string(hash), Role: role}).Error; err != nil {
		c.t.Fatal(err)
	}
	other := *c
	other.client = c.newClient()
	if p := other.post("/admin/login", url.Values{"email": {email}, "password": {adminPassword}}); p.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("log-in of %s: %d\n%s", email, p.StatusCode, p.Body)
	}
	return &other
}

// api sends a request to the JSON twin with the admin token.
func (c *console) api(path string) page {
	return c.do(http.DefaultClient, "GET", path, nil, http.Header{"Authorization": {"Bearer " + apiToken}, "Accept": {"application/json"}})
}

// newOrder creates a pending order of one DEMO item.
func (c *console) newOrder(sku string, qty int64) *models.Order {
	c.t.Helper()
	o, err := c.orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: sku, Qty: qty}},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return o
}

// deliver sends one signed sandbox delivery and returns the answer's result.
func (c *console) deliver(eventID string, body []byte) int {
	c.t.Helper()
	req, err := http.NewRequest("POST", c.URL+"/callbacks/sandbox", bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header = testenv.SandboxHeaders(eventID, body, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
