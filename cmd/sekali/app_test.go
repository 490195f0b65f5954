package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// testApp is a real `sekali serve` started in-process through run(), on a
// fresh database and a free port. Tests speak HTTP to it and read the
// database directly to check effects.
type testApp struct {
	URL         string
	DB          *gorm.DB
	DatabaseURL string
	env         map[string]string
	client      *http.Client
	tokens      sync.Map // order id → its access token, from the creation's answer
}

// startApp runs `sekali serve` with the test environment plus env, and
// stops it when the test ends.
func startApp(t *testing.T, env map[string]string) *testApp {
	t.Helper()
	return startServe(t, env)
}

// startServe is startApp with serve's flags flags (--roles=web).
func startServe(t *testing.T, env map[string]string, flags ...string) *testApp {
	t.Helper()
	a := newTestApp(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	logs := logOutput(t) // before the cleanup that stops the app, so that it stays open until then
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"sekali", "serve"}, flags...), a.getenv, outW, logs)
		outW.Close()
	}()
	a.URL = servingURL(t, outR, func() error { cancel(); return <-done })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sekali serve: %v", err)
		}
		a.client.CloseIdleConnections()
	})
	return a
}

// newTestApp prepares the environment of a test app: its own Redis and
// database unless env names them.
func newTestApp(t *testing.T, env map[string]string) *testApp {
	t.Helper()
	a := &testApp{env: map[string]string{
		"HTTP_ADDR":              "127.0.0.1:0",
		"SANDBOX_WEBHOOK_SECRET": testenv.SandboxSecret,
		"ORDER_TOKEN_SECRET":     testenv.OrderTokenSecret,
		"LOG_LEVEL":              "warn", // what went wrong, into the test's log
		"DB_MAX_CONNS":           "10",
		// Every test speaks from 127.0.0.1, many with hundreds of orders:
		// the cap on one client's unpaid orders is off but where a test
		// sets it (TestOneClientCannotHoardStock).
		"OPEN_ORDERS_PER_CLIENT": "0",
		// A request has the test's time, not the default 10 s: on a busy
		// machine with the race detector, one bcrypt hash (accepting an
		// invitation) has taken longer than that. Tests of a request's
		// deadline set their own.
		"REQUEST_TIMEOUT": testenv.Budget(t).String(),
	}}
	for k, v := range env {
		a.env[k] = v
	}
	if a.env["REDIS_URL"] == "" {
		a.env["REDIS_URL"] = testenv.StartRedis(t).URL() // Asynq's keys are global: one server per app
	}
	if a.env["DATABASE_URL"] == "" {
		a.env["DATABASE_URL"] = testenv.NewDatabaseURL(t)
	}
	a.DatabaseURL = a.env["DATABASE_URL"]
	// The test reads the database directly, also when the app reaches it
	// through PgBouncer (DATABASE_LISTEN_URL is then the direct URL).
	direct := a.env["DATABASE_LISTEN_URL"]
	if direct == "" {
		direct = a.DatabaseURL
	}
	a.DB = testenv.OpenDB(t, direct)
	a.client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
	}
	return a
}

// servingURL reads serve's output until it says where it serves; stop
// ends the server when it does not within the test's budget.
func servingURL(t *testing.T, out io.Reader, stop func() error) string {
	t.Helper()
	urls := make(chan string, 1)
	go func() { // reads to the end, so that serve never blocks on its output
		sc := bufio.NewScanner(out)
		found := false
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "Sekali is serving on "); ok && !found {
				urls <- u
				found = true
			}
		}
		if !found {
			close(urls)
		}
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("sekali serve stopped before serving: %v", stop())
		}
		return u
	case <-time.After(testenv.Budget(t)):
		t.Fatalf("sekali serve did not start within the test's budget: %v", stop())
	}
	return ""
}

func (a *testApp) getenv(k string) string { return a.env[k] }

// logOutput is where a test's `sekali` writes its log: the test's own
// log, shown when it fails (testenv.LogWriter).
func logOutput(t testing.TB) io.Writer { return testenv.LogWriter(t) }

// response is an HTTP answer with its body decoded as a JSON object.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

func (r response) str(key string) string { s, _ := r.JSON[key].(string); return s }

func (a *testApp) do(t *testing.T, method, path string, header http.Header, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, a.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := a.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return response{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := response{Status: res.StatusCode, Header: res.Header, Body: b}
	json.Unmarshal(b, &r.JSON)
	return r
}

// postOrder sends POST /api/orders with an Idempotency-Key.
func (a *testApp) postOrder(t *testing.T, key string, body string) response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	r := a.do(t, "POST", "/api/orders", h, []byte(body))
	if r.Status == http.StatusCreated {
		a.tokens.Store(r.str("id"), r.str("access_token"))
	}
	return r
}

// orderURL is the API path of order id with its access token, as the
// customer who created it would use it.
func (a *testApp) orderURL(id string) string {
	token, _ := a.tokens.Load(id)
	return "/api/orders/" + id + "?t=" + fmt.Sprint(token)
}

// orderAction is orderURL for an action on the order ("cancel").
func (a *testApp) orderAction(id, action string) string {
	token, _ := a.tokens.Load(id)
	return "/api/orders/" + id + "/" + action + "?t=" + fmt.Sprint(token)
}

// createOrder creates an order of the given sku:qty items and returns its id.
func (a *testApp) createOrder(t *testing.T, items map[string]int) string {
	t.Helper()
	var lines []string
	for sku, qty := range items {
		lines = append(lines, fmt.Sprintf(`{"sku":%q,"qty":%d}`, sku, qty))
	}
	r := a.postOrder(t, randomKey(), `{"customer_email":"buyer@example.com","items":[`+strings.Join(lines, ",")+`]}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create order: %d %s", r.Status, r.Body)
	}
	return r.str("id")
}

// callback delivers a signed sandbox callback.
func (a *testApp) callback(t *testing.T, eventID string, body []byte) response {
	t.Helper()
	return a.do(t, "POST", "/callbacks/sandbox", testenv.SandboxHeaders(eventID, body, time.Now()), body)
}

func (a *testApp) order(t *testing.T, id string) models.Order {
	t.Helper()
	var o models.Order
	if err := a.DB.Preload("Payments").Preload("Items").Take(&o, "id = ?", id).Error; err != nil {
		t.Fatalf("read order %s: %v", id, err)
	}
	return o
}

func (a *testApp) stock(t *testing.T, sku string) int64 {
	t.Helper()
	var p models.Product
	if err := a.DB.Take(&p, "sku = ?", sku).Error; err != nil {
		t.Fatalf("read product %s: %v", sku, err)
	}
	return p.Stock
}

// count runs a SELECT count(*) … query.
func (a *testApp) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := a.DB.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// countCheck is a count the database must hold: what it is, the query
// that counts it, and the count.
type countCheck struct {
	what  string
	query string
	want  int64
}

// expectCounts checks each count, its query run with args.
func (a *testApp) expectCounts(t *testing.T, checks []countCheck, args ...any) {
	t.Helper()
	for _, c := range checks {
		if n := a.count(t, c.query, args...); n != c.want {
			t.Errorf("%s: %d, want %d", c.what, n, c.want)
		}
	}
}

// eventually waits until query counts want, for rows written after the
// response (the audit rows of deliveries that changed nothing), and fails
// the test if that takes more than the test's budget.
func (a *testApp) eventually(t *testing.T, want int64, query string, args ...any) {
	t.Helper()
	var last int64
	met := false
	defer func() { // Fatalf's Goexit runs this: the count it stopped at
		if !met {
			t.Logf("the count was %d, not %d", last, want)
		}
	}()
	testenv.Eventually(t, fmt.Sprintf("%s = %d", query, want), func() bool {
		last = a.count(t, query, args...)
		return last == want
	})
	met = true
}

// verify runs `sekali verify` against the app's database and fails the
// test on any violation, showing the report. Its drain (waiting for the
// jobs of paid orders) may take the test's budget, not verify's default
// 30 s: a busy machine runs the jobs late, not never.
func (a *testApp) verify(t *testing.T) {
	t.Helper()
	var out bytes.Buffer
	drain := "--drain-timeout=" + testenv.Budget(t).Round(time.Second).String()
	if err := run(context.Background(), []string{"sekali", "verify", drain}, a.getenv, &out, io.Discard); err != nil {
		t.Fatalf("sekali verify: %v\n%s", err, out.String())
	}
}

// concurrently runs fn(i) for i in [0, n) in n goroutines released at the
// same moment, and waits for all of them.
func concurrently(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

func randomKey() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newProduct creates a product with a unique SKU and returns the SKU.
func (a *testApp) newProduct(t *testing.T, price, stock int64) string {
	t.Helper()
	sku := "SKU-" + strings.ToUpper(randomKey())
	testenv.MustCreateProduct(t, a.DB, sku, price, stock)
	return sku
}

type bytesBuffer = bytes.Buffer

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
