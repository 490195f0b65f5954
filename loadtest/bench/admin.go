package main

// The admin section of `make bench`: on a database of 200,000 orders
// (loadtest/bulkseed, about 1,000,000 deliveries), every list
// page of the console and its dashboard, requested one after another
// through their JSON twins (/api/admin/…) and through the HTML pages with
// a logged-in session, against the goal of a p95 under 150 ms. Speed is
// also given as a ratio to /healthz measured the same way in the same run.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/migrations"
)

const (
	adminToken    = "bench-admin-token"
	adminEmail    = "admin@example.com"
	adminPassword = "bench-admin-password"
	// adminGoalP95 is the console's goal: every list page and the
	// dashboard under this at p95, on the 200k database, on 2 cores.
	adminGoalP95 = 150.0 // ms
	// deepPage is how many times the deep page follows `next`.
	deepPage = 20
)

// adminOptions are the admin section's settings (flags of main).
type adminOptions struct {
	bin, pgURL, redisURL, out string
	dbName                    string
	orders                    int           // the size of the database
	requests, warmup          int           // per page
	reseed                    bool          // seed again even if the database has the data
	maxAge                    time.Duration // older data is seeded again: the dashboard's windows would be empty
}

// dbMeta is what the bench database's comment says about its data, so
// that a later run can reuse it.
type dbMeta struct {
	Orders     int               `json:"orders"`
	Migrations map[string]string `json:"migrations"` // file → hash of its content when seeded
	SeededAt   time.Time         `json:"seeded_at"`
	SeedTook   string            `json:"seed_took"`
}

// pageResult is one page's latencies.
type pageResult struct {
	Name     string  `json:"name"`
	Path     string  `json:"path"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Bytes    int     `json:"bytes"`
	P50      float64 `json:"p50_ms"`
	P95      float64 `json:"p95_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
	Ratio    float64 `json:"p95_over_healthz_p95"`
	Pass     bool    `json:"pass"`
	Goal     bool    `json:"goal"` // measured against the 150 ms goal (every page but /healthz)
}

type adminResults struct {
	Machine     string            `json:"machine"`
	Cores       int               `json:"cores"`
	Database    string            `json:"database"`
	Seed        string            `json:"seed"` // "reused …" or "seeded …"
	SeedSeconds float64           `json:"seed_seconds,omitempty"`
	Rows        map[string]int64  `json:"rows"`
	Requests    int               `json:"requests_per_page"`
	Warmup      int               `json:"warmup_per_page"`
	GoalP95MS   float64           `json:"goal_p95_ms"`
	Healthz     *pageResult       `json:"healthz"`
	API         []*pageResult     `json:"api"`
	HTML        []*pageResult     `json:"html"`
	SeqScanRows map[string]int64  `json:"seq_scan_rows_read"` // big tables, during the page runs
	Picked      map[string]string `json:"picked"`             // the ids and filters the pages used
	Passed      bool              `json:"passed"`
	// LoadAverage is the machine's 1-minute load average before and after
	// the pages were measured: other work on the same cores shows here.
	LoadAverage [2]float64 `json:"load_average"`
}

// runAdmin runs the admin section and writes its results.
func runAdmin(ctx context.Context, o adminOptions) error {
	fmt.Printf("\nadmin console: %d orders in database %s, %d requests per page after %d warm-up, one at a time, in rounds\n",
		o.orders, o.dbName, o.requests, o.warmup)
	dbURL := withDB(o.pgURL, o.dbName)
	r := &adminResults{Machine: runtime.GOOS + "/" + runtime.GOARCH, Cores: runtime.NumCPU(), Database: o.dbName,
		Requests: o.requests, Warmup: o.warmup, GoalP95MS: adminGoalP95, Picked: map[string]string{}}
	if err := ensureAdminData(ctx, o, dbURL, r); err != nil {
		return err
	}
	fmt.Printf("  %s\n", r.Seed)

	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	// A seed leaves gigabytes of dirty buffers for the checkpointer to
	// write while the pages are measured: write them now. (CHECKPOINT
	// needs a superuser or pg_checkpoint; without, measure anyway.)
	if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
		fmt.Printf("  no CHECKPOINT before measuring (%v): a seed's writes may still slow the first pages\n", err)
	}
	if r.Rows, err = rowCounts(ctx, db); err != nil {
		return err
	}
	fmt.Printf("  rows: %d orders, %d callbacks, %d deliveries, %d jobs, %d outbox rows, %d stock movements\n",
		r.Rows["orders"], r.Rows["payment_callbacks"], r.Rows["callback_deliveries"], r.Rows["job_executions"],
		r.Rows["outbox_messages"], r.Rows["stock_movements"])

	srv, err := startAdminServer(o.bin, dbURL, o.redisURL)
	if err != nil {
		return err
	}
	defer srv.stop()
	c, err := newAdminClient(srv.url)
	if err != nil {
		return err
	}
	if err := c.login(); err != nil {
		return err
	}

	pages, err := adminPages(ctx, db, r.Picked)
	if err != nil {
		return err
	}
	// The deep pages: follow `next` from the first page.
	for _, list := range []string{"orders", "deliveries"} {
		p, err := c.deepPage("/api/admin/"+list, deepPage)
		if err != nil {
			return err
		}
		r.Picked[list+" page "+strconv.Itoa(deepPage)] = p
		pages = append(pages, adminPage{name: list + ", page " + strconv.Itoa(deepPage), path: strings.TrimPrefix(p, "/api")})
	}
	slices.SortStableFunc(pages, func(a, b adminPage) int { return pageOrder(a.name) - pageOrder(b.name) })

	// The counts above scanned the big tables: have this connection
	// report that before the snapshot, not during the pages.
	if _, err := db.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return err
	}
	seq0, err := seqScanRows(ctx, db)
	if err != nil {
		return err
	}
	r.LoadAverage[0] = loadAverage()
	r.Healthz = &pageResult{Name: "/healthz", Path: "/healthz"}
	all := []*pageResult{r.Healthz}
	for _, p := range pages {
		r.API = append(r.API, &pageResult{Name: p.name, Path: "/api" + p.path, Goal: true})
	}
	for _, p := range pages {
		r.HTML = append(r.HTML, &pageResult{Name: p.name, Path: p.path, Goal: true})
	}
	c.measureAll(append(append(all, r.API...), r.HTML...), o)
	r.LoadAverage[1] = loadAverage()
	// Table statistics reach the shared counters within PGSTAT_IDLE_INTERVAL
	// (10 s) of a connection going idle.
	time.Sleep(11 * time.Second)
	seq1, err := seqScanRows(ctx, db)
	if err != nil {
		return err
	}
	r.SeqScanRows = map[string]int64{}
	for t, n := range seq1 {
		r.SeqScanRows[t] = n - seq0[t]
	}

	judgeAdmin(r)
	return writeAdmin(r, o.out)
}

// judgeAdmin sets each page's ratio to /healthz and whether it passed:
// under the p95 goal without errors. The section passes when every page
// does.
func judgeAdmin(r *adminResults) {
	r.Passed = true
	for _, p := range append(slices.Clone(r.API), r.HTML...) {
		p.Ratio = p.P95 / max(r.Healthz.P95, 0.001)
		p.Pass = p.Errors == 0 && p.P95 < adminGoalP95
		r.Passed = r.Passed && p.Pass
	}
}

// adminPage is a console page, by its HTML path; its JSON twin is /api
// and the same path.
type adminPage struct{ name, path string }

var pageNames = []string{
	"dashboard", "callbacks", "callbacks, result=conflict", "callbacks, result=rejected", "callbacks, key prefix",
	"callbacks, one-day window", "callback detail", "deliveries", "deliveries, outcome=refused", "deliveries, page 20",
	"deliveries, one-day window", "orders", "orders, status=pending", "orders, email", "orders, page 20",
	"orders, one-day window", "order detail", "jobs", "jobs, status=failed", "jobs, key=order id", "outbox",
	"product detail", "actions",
	"callbacks, transaction", "callbacks, email", "deliveries, transaction", "deliveries, request id", "orders, transaction",
	"delivery detail", "delivery dry run", "job detail",
	"callbacks, search", "callbacks, body path", "deliveries, body path",
}

func pageOrder(name string) int {
	if i := slices.Index(pageNames, name); i >= 0 {
		return i
	}
	return len(pageNames)
}

// adminPages picks what the detail pages and the filters show: a callback
// with conflicting deliveries (the richest story), its order, that
// order's customer, a prefix of its key, the first bulk product.
func adminPages(ctx context.Context, db *pgx.Conn, picked map[string]string) ([]adminPage, error) {
	var cbID int64
	var orderID, key, email string
	err := db.QueryRow(ctx, `
SELECT c.id, c.order_id, c.idempotency_key, o.customer_email
FROM payment_callbacks c JOIN orders o ON o.id = c.order_id
WHERE c.conflict_count > 0 AND o.status = 'paid'
ORDER BY c.id DESC LIMIT 1`).Scan(&cbID, &orderID, &key, &email)
	if err != nil {
		return nil, fmt.Errorf("pick a callback: %w", err)
	}
	var tx, request string
	var conflict int64
	err = db.QueryRow(ctx, `
SELECT c.transaction_id, d.id, d.request_id FROM payment_callbacks c JOIN callback_deliveries d ON d.callback_id = c.id
WHERE c.id = $1 AND d.outcome = 'conflict' ORDER BY d.id DESC LIMIT 1`, cbID).Scan(&tx, &conflict, &request)
	if err != nil {
		return nil, fmt.Errorf("pick a conflicting delivery: %w", err)
	}
	picked["transaction"], picked["delivery"], picked["request id"] = tx, strconv.FormatInt(conflict, 10), request
	prefix := key[:min(len(key), 6)]
	const sku = "BULK-0001"
	// A day near the start of the data: the lists are newest first, so an
	// old window is the hard case.
	day := time.Now().UTC().Add(-25 * 24 * time.Hour).Truncate(24 * time.Hour)
	window := url.Values{"from": {day.Format("2006-01-02T15:04")}, "to": {day.Add(24 * time.Hour).Format("2006-01-02T15:04")}}.Encode()
	picked["callback"], picked["order"], picked["email"], picked["key prefix"], picked["product"], picked["window"] =
		strconv.FormatInt(cbID, 10), orderID, email, prefix, sku, window
	return []adminPage{
		{"dashboard", "/admin"},
		{"callbacks", "/admin/callbacks"},
		{"callbacks, result=conflict", "/admin/callbacks?result=conflict"},
		{"callbacks, result=rejected", "/admin/callbacks?result=rejected"},
		{"callbacks, key prefix", "/admin/callbacks?key=" + url.QueryEscape(prefix)},
		{"callbacks, one-day window", "/admin/callbacks?" + window},
		{"callback detail", "/admin/callbacks/" + strconv.FormatInt(cbID, 10)},
		{"deliveries", "/admin/deliveries"},
		{"deliveries, outcome=refused", "/admin/deliveries?outcome=refused"},
		{"deliveries, one-day window", "/admin/deliveries?" + window},
		{"orders", "/admin/orders"},
		{"orders, status=pending", "/admin/orders?status=pending"},
		{"orders, email", "/admin/orders?email=" + url.QueryEscape(email)},
		{"orders, one-day window", "/admin/orders?" + window},
		{"order detail", "/admin/orders/" + url.PathEscape(orderID)},
		{"jobs", "/admin/jobs"},
		{"jobs, status=failed", "/admin/jobs?status=failed"},
		{"jobs, key=order id", "/admin/jobs?key=" + url.QueryEscape(orderID)},
		{"outbox", "/admin/outbox"},
		{"product detail", "/admin/products/" + sku},
		{"actions", "/admin/actions"},
		{"callbacks, transaction", "/admin/callbacks?transaction=" + url.QueryEscape(tx)},
		{"callbacks, email", "/admin/callbacks?email=" + url.QueryEscape(email)},
		{"deliveries, transaction", "/admin/deliveries?transaction=" + url.QueryEscape(tx)},
		{"deliveries, request id", "/admin/deliveries?request=" + url.QueryEscape(request)},
		{"orders, transaction", "/admin/orders?transaction=" + url.QueryEscape(tx)},
		{"delivery detail", "/admin/deliveries/" + strconv.FormatInt(conflict, 10)},
		{"delivery dry run", "/admin/deliveries/" + strconv.FormatInt(conflict, 10) + "/dry-run"},
		{"job detail", "/admin/jobs/" + url.PathEscape("invoice:generate:"+orderID)},
		{"callbacks, search", "/admin/callbacks?q=" + url.QueryEscape(email)},
		{"callbacks, body path", "/admin/callbacks?body=" + url.QueryEscape("transaction_id="+tx)},
		{"deliveries, body path", "/admin/deliveries?body=" + url.QueryEscape("transaction_id="+tx)},
	}, nil
}

// ensureAdminData makes sure the bench database holds o.orders bulk
// orders seeded with the current migrations, recently enough: it reuses
// the database when its comment says so, and otherwise drops it, migrates
// a new one and seeds it.
func ensureAdminData(ctx context.Context, o adminOptions, dbURL string, r *adminResults) error {
	hashes, err := migrationHashes()
	if err != nil {
		return err
	}
	env := adminEnv(dbURL, o.redisURL)
	admin, err := pgx.Connect(ctx, o.pgURL)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	var comment *string
	err = admin.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, o.dbName).Scan(&comment)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	var meta dbMeta
	why := "no database " + o.dbName
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case comment == nil || json.Unmarshal([]byte(*comment), &meta) != nil:
		why = "the database has no bench comment"
	case o.reseed:
		why = "-admin-reseed"
	case meta.Orders != o.orders:
		why = fmt.Sprintf("it holds %d bulk orders, not %d", meta.Orders, o.orders)
	case changedMigration(meta.Migrations, hashes) != "":
		// A migration that ran already is not run again: its new indexes
		// would be missing.
		why = "migration " + changedMigration(meta.Migrations, hashes) + " changed since it was seeded"
	case time.Since(meta.SeededAt) > o.maxAge:
		why = fmt.Sprintf("its data is %s old (the dashboard's windows would be empty); -admin-max-age is %s",
			time.Since(meta.SeededAt).Round(time.Minute), o.maxAge)
	default:
		// New migrations run on the data as on any database.
		if out, err := command(o.bin, env, "migrate", "up").CombinedOutput(); err != nil {
			return fmt.Errorf("migrate: %v\n%s", err, out)
		}
		if len(hashes) > len(meta.Migrations) {
			if err := commentDB(ctx, admin, o.dbName, dbMeta{Orders: meta.Orders, Migrations: hashes,
				SeededAt: meta.SeededAt, SeedTook: meta.SeedTook}); err != nil {
				return err
			}
		}
		r.Seed = fmt.Sprintf("reused database %s: seeded %s ago with %d orders (seeding took %s; -admin-reseed seeds again)",
			o.dbName, time.Since(meta.SeededAt).Round(time.Minute), meta.Orders, meta.SeedTook)
		return nil
	}
	fmt.Printf("  seeding %s (%s): sekali seed, then bulkseed -orders=%d …\n", o.dbName, why, o.orders)
	seeder, cleanup, err := buildBulkseed()
	if err != nil {
		return err
	}
	defer cleanup()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{o.dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	if out, err := command(o.bin, env, "migrate", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %v\n%s", err, out)
	}
	// The admin user the pages log in as, then the orders.
	if out, err := command(o.bin, env, "seed").CombinedOutput(); err != nil {
		return fmt.Errorf("seed: %v\n%s", err, out)
	}
	start := time.Now()
	seed := command(seeder, env, "-orders="+strconv.Itoa(o.orders))
	seed.Stdout, seed.Stderr = os.Stdout, os.Stderr
	if err := seed.Run(); err != nil {
		return fmt.Errorf("bulkseed: %w", err)
	}
	took := time.Since(start)
	meta = dbMeta{Orders: o.orders, Migrations: hashes, SeededAt: time.Now().UTC(), SeedTook: took.Round(time.Second).String()}
	if err := commentDB(ctx, admin, o.dbName, meta); err != nil {
		return err
	}
	r.Seed = fmt.Sprintf("seeded database %s with %d orders in %s (%s)", o.dbName, o.orders, took.Round(time.Second), why)
	r.SeedSeconds = took.Seconds()
	return nil
}

// buildBulkseed builds loadtest/bulkseed, the bulk seed that is not part
// of the sekali binary, into a temporary directory that cleanup removes.
func buildBulkseed() (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "bench-bulkseed-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "bulkseed")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sekali/sekali/loadtest/bulkseed").CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build loadtest/bulkseed: %v\n%s", err, out)
	}
	return bin, cleanup, nil
}

// commentDB records meta as the database's comment.
func commentDB(ctx context.Context, admin *pgx.Conn, name string, meta dbMeta) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	_, err = admin.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", pgx.Identifier{name}.Sanitize(),
		strings.ReplaceAll(string(b), "'", "''")))
	return err
}

// migrationHashes identifies the schema the data is seeded with: each
// migration file's content, hashed.
func migrationHashes() (map[string]string, error) {
	hashes := map[string]string{}
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		sum := sha256.Sum256(b)
		hashes[path] = hex.EncodeToString(sum[:8])
		return err
	})
	return hashes, err
}

// changedMigration names a migration the data was seeded with that is now
// different or gone, "" when there is none.
func changedMigration(seeded, now map[string]string) string {
	for _, f := range slices.Sorted(maps.Keys(seeded)) {
		if now[f] != seeded[f] {
			return f
		}
	}
	return ""
}

// loadAverage is the 1-minute load average (Linux), 0 where unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// bigTables are the tables that grow with the traffic.
var bigTables = []string{"orders", "order_items", "payment_callbacks", "callback_deliveries", "payments", "stock_movements",
	"order_transitions", "invoices", "outbound_emails", "outbox_messages", "job_executions"}

func rowCounts(ctx context.Context, db *pgx.Conn) (map[string]int64, error) {
	counts := map[string]int64{}
	for _, t := range bigTables {
		var n int64
		if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t}.Sanitize()).Scan(&n); err != nil {
			return nil, err
		}
		counts[t] = n
	}
	return counts, nil
}

// seqScanRows is how many rows sequential scans have read from each big
// table so far.
func seqScanRows(ctx context.Context, db *pgx.Conn) (map[string]int64, error) {
	rows, err := db.Query(ctx, `SELECT relname, seq_tup_read FROM pg_stat_user_tables WHERE relname = ANY($1)`, bigTables)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := map[string]int64{}
	for rows.Next() {
		var t string
		var v int64
		if err := rows.Scan(&t, &v); err != nil {
			return nil, err
		}
		n[t] = v
	}
	return n, rows.Err()
}

func adminEnv(dbURL, redisURL string) []string {
	return append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL="+redisURL, "HTTP_ADDR=127.0.0.1:0",
		"SANDBOX_WEBHOOK_SECRET="+benchSecret, "ORDER_TOKEN_SECRET="+orderTokenSecret, "LOG_LEVEL=error", "ADMIN_API_TOKEN="+adminToken,
		"ADMIN_EMAIL="+adminEmail, "ADMIN_PASSWORD="+adminPassword, "COOKIE_SECURE=false")
}

func command(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	return cmd
}

// startAdminServer starts `sekali serve --roles=web` with the console on:
// no worker, so nothing changes the data while it is measured.
func startAdminServer(bin, dbURL, redisURL string) (*server, error) {
	return serve(command(bin, adminEnv(dbURL, redisURL), "serve", "--roles=web"))
}

// adminClient makes one request at a time, with the admin session's
// cookie for the HTML pages and the bearer token for /api/admin.
type adminClient struct {
	base string
	http *http.Client
}

func newAdminClient(base string) (*adminClient, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	return &adminClient{base: base, http: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// login logs in through the form, as a browser does.
func (c *adminClient) login() error {
	form := url.Values{"email": {adminEmail}, "password": {adminPassword}, "next": {"/admin"}}
	resp, err := c.http.PostForm(c.base+"/admin/login", form)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("admin log-in: %s (is ADMIN_PASSWORD the one the database was seeded with?)", resp.Status)
	}
	return nil
}

func (c *adminClient) get(path string) (status, size int, err error) {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, 0, err
	}
	if strings.HasPrefix(path, "/api/") {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, int(n), err
}

// deepPage follows `next` from the list at path n-1 times and returns the
// URL of page n, as an /api path.
func (c *adminClient) deepPage(path string, n int) (string, error) {
	for page := 1; page < n; page++ {
		req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := c.http.Do(req)
		if err != nil {
			return "", err
		}
		var body struct {
			Next string `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return "", fmt.Errorf("%s: %s %v", path, resp.Status, err)
		}
		if body.Next == "" {
			return "", fmt.Errorf("%s: page %d is the last", path, page)
		}
		path = body.Next // on the URL asked: /api/admin/...
	}
	return path, nil
}

// measureAll requests every page o.warmup times, then o.requests times,
// one request at a time, in rounds: each round asks every page once, so
// that a burst of other work on the machine weighs on every page alike
// instead of on the one measured at that moment.
func (c *adminClient) measureAll(pages []*pageResult, o adminOptions) {
	lat := make([][]float64, len(pages))
	for round := 0; round < o.warmup+o.requests; round++ {
		for i, p := range pages {
			start := time.Now()
			status, size, err := c.get(p.Path)
			took := ms(time.Since(start))
			if round < o.warmup {
				continue
			}
			lat[i] = append(lat[i], took)
			p.Requests++
			p.Bytes = size
			if err != nil || status != http.StatusOK {
				p.Errors++
			}
		}
	}
	for i, p := range pages {
		l := lat[i]
		slices.Sort(l)
		p.P50, p.P95, p.P99, p.Max = quantile(l, 0.50), quantile(l, 0.95), quantile(l, 0.99), l[len(l)-1]
		mark := ""
		if p.Goal && p.P95 >= adminGoalP95 {
			mark = "  ← over the goal"
		}
		if p.Errors > 0 {
			mark += fmt.Sprintf("  %d errors", p.Errors)
		}
		fmt.Printf("  %-5s %-30s p50 %7.2f ms  p95 %7.2f ms  p99 %7.2f ms%s\n", kind(p.Path), p.Name, p.P50, p.P95, p.P99, mark)
	}
}

func kind(path string) string {
	switch {
	case strings.HasPrefix(path, "/api/"):
		return "json"
	case strings.HasPrefix(path, "/admin"):
		return "html"
	}
	return ""
}

// quantile of sorted values, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// writeAdmin prints the table and saves it as Markdown and JSON.
func writeAdmin(r *adminResults, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	md := adminMarkdown(r)
	fmt.Println()
	fmt.Print(md)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(dir, "bench-admin-"+time.Now().UTC().Format("20060102-150405"))
	if err := os.WriteFile(base+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwritten: %s.{json,md}\n", base)
	return nil
}

func adminMarkdown(r *adminResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Sekali admin console benchmark, %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%s, %d cores; one server (`serve --roles=web`), PostgreSQL and the client on the same machine. "+
		"Database `%s`: %d orders, %d callbacks, %d deliveries, %d job rows, %d outbox rows, %d stock movements (%s).\n\n",
		r.Machine, r.Cores, r.Database, r.Rows["orders"], r.Rows["payment_callbacks"], r.Rows["callback_deliveries"],
		r.Rows["job_executions"], r.Rows["outbox_messages"], r.Rows["stock_movements"], r.Seed)
	fmt.Fprintf(&b, "Each page: %d requests, after %d warm-up requests, one request at a time, in rounds that ask every page once. Goal: p95 under %.0f ms. "+
		"Ratio: the page's p95 ÷ the p95 of /healthz measured the same way (%.2f ms). "+
		"Load average while measuring: %.2f at the start, %.2f at the end (%d cores).\n\n",
		r.Requests, r.Warmup, r.GoalP95MS, r.Healthz.P95, r.LoadAverage[0], r.LoadAverage[1], r.Cores)
	passed, all := 0, 0
	for _, p := range append(slices.Clone(r.API), r.HTML...) {
		all++
		if p.Pass {
			passed++
		}
	}
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "**%s**: %d of %d pages under %.0f ms at p95 without errors.\n", verdict, passed, all, r.GoalP95MS)
	for _, t := range []struct {
		title string
		rows  []*pageResult
	}{{"JSON twins (`/api/admin/…`, bearer token)", r.API}, {"HTML pages (`/admin/…`, logged-in session)", r.HTML}} {
		fmt.Fprintf(&b, "\n### %s\n\n| page | p50 ms | p95 ms | p99 ms | max ms | p95 ÷ /healthz | bytes | goal |\n|---|---:|---:|---:|---:|---:|---:|---|\n", t.title)
		for _, p := range t.rows {
			v := "PASS"
			if !p.Pass {
				v = "**FAIL**"
			}
			if p.Errors > 0 {
				v += fmt.Sprintf(" (%d errors)", p.Errors)
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %d | %s |\n", p.Name, p.P50, p.P95, p.P99, p.Max, p.Ratio, p.Bytes, v)
		}
	}
	h := r.Healthz
	fmt.Fprintf(&b, "| /healthz (baseline) | %.2f | %.2f | %.2f | %.2f | 1 | %d | |\n", h.P50, h.P95, h.P99, h.Max, h.Bytes)
	var total int64
	for _, n := range r.SeqScanRows {
		total += n
	}
	pages := len(r.API) + len(r.HTML)
	fmt.Fprintf(&b, "\nRows read by sequential scans of the big tables during the %d requests: %d",
		pages*(r.Requests+r.Warmup), total)
	var scanned []string
	for _, t := range slices.Sorted(maps.Keys(r.SeqScanRows)) {
		if n := r.SeqScanRows[t]; n > 0 {
			scanned = append(scanned, fmt.Sprintf("%s %d", t, n))
		}
	}
	if len(scanned) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(scanned, ", "))
	}
	b.WriteString(".\n\nPicked: ")
	var picked []string
	for _, k := range slices.Sorted(maps.Keys(r.Picked)) {
		picked = append(picked, fmt.Sprintf("%s `%s`", k, r.Picked[k]))
	}
	b.WriteString(strings.Join(picked, ", ") + ".\n")
	return b.String()
}
