package audit_test

// The application the books test drives: the web server as serve wires
// it, with every gateway of the registry configured — their
// notifications checked with their own secrets, their APIs (status,
// refunds) answered by their emulations — on one database, and the jobs
// run by the test, one task at a time, through the guard. The gateways'
// world is the test's too: what an emulation would notify is kept until
// the test delivers it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/scs/postgresstore"
	"github.com/hibiken/asynq"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/mail"
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
)

// The secrets the gateways are configured with, and the admin's.
const (
	booksAdmin    = "owner@example.com"
	booksPassword = "correct horse battery"
	booksToken    = "books-admin-token-0123456789"
	// approvalAbove is REFUND_APPROVAL_ABOVE's IDR amount: a refund that
	// takes what its order asked above it waits for an owner.
	approvalAbove = 60000
)

var booksSecrets = map[string]string{
	"SANDBOX_WEBHOOK_SECRET": "whsec_" + "Ym9va3MtdGVzdC1zYW5kYm94LWtleQ==",
	"MIDTRANS_SERVER_KEY":    "SB-Mid-server-BOOKS0123456789",
	"XENDIT_CALLBACK_TOKEN":  "xnd-callback-token-books-0123",
	"XENDIT_SECRET_KEY":      "xnd_development_books_0123456789",
	"STRIPE_WEBHOOK_SECRET":  "whsec_books_0123456789abcdef",
	"STRIPE_SECRET_KEY":      "sk_test_books_0123456789",
}

// tb is what the harness needs of a test: *testing.T or *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// app is the application and the gateways' world around it.
type app struct {
	db      *gorm.DB
	url     string // the web server's
	client  *http.Client
	senders map[string]payments.Sender   // each gateway's notifications, by provider
	parsers map[string]payments.Provider // each gateway's reading of them, to tell the model
	world   *world
	deps    jobs.Deps
	refunds *refunds.Service
	mailer  *keptMailer
}

// newApp builds the application on a database of its own.
func newApp(t *testing.T) *app {
	t.Helper()
	db := testenv.NewDB(t)
	rdb := testenv.NewRedis(t)
	log := testenv.Logger(t)
	a := &app{db: db, world: newWorld(), mailer: &keptMailer{}}

	// The gateways' APIs, as the sandbox gateway serves them: on a
	// listener of their own, known before the gateways are configured.
	gw := httptest.NewUnstartedServer(a.world)
	env := map[string]string{"SANDBOX_GATEWAY": "on", "STRIPE_API_URL": "http://" + gw.Listener.Addr().String() + "/sandbox/stripe",
		"XENDIT_API_URL": "http://" + gw.Listener.Addr().String() + "/sandbox/xendit", "OPEN_ORDERS_PER_CLIENT": "0",
		"ADMIN_API_TOKEN": booksToken, "COOKIE_SECURE": "false", "REFUND_APPROVAL_ABOVE": fmt.Sprintf("IDR:%d", approvalAbove)}
	for k, v := range booksSecrets {
		env[k] = v
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RequestTimeout = testenv.Budget(t)
	set, err := gateways.Configure(config.Env{Config: cfg, Getenv: getenv, SandboxURL: "http://" + gw.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	a.senders, a.parsers = map[string]payments.Sender{}, map[string]payments.Provider{}
	for _, s := range set.Senders() {
		a.senders[s.Provider()] = s
	}
	for _, p := range set.Providers() {
		a.parsers[p.Name()] = p
	}
	for _, em := range set.Emulators() {
		a.world.emulate(em, a.senders[em.Provider()])
	}
	gw.Start()
	t.Cleanup(gw.Close)

	m := metrics.New()
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})
	orderService.OpenPerClient = 0
	orderService.TokenKey = cfg.OrderTokenKey
	pay := payments.NewService(db, log, time.Now, m, jobs.Tasks{}, set.Providers()...)
	pay.KeepBodies = true
	t.Cleanup(pay.Close)
	a.refunds = refunds.NewService(db, log, time.Now, m, pay, jobs.Tasks{}, set.Refunders()...)
	a.refunds.ApprovalAbove, a.refunds.ApprovalWindow = cfg.RefundApprovalAbove, cfg.RefundApprovalWindow
	// A call's lease outlasts any step: the test moves it into the past
	// when it means the lease to have passed.
	a.refunds.CallTimeout = testenv.Budget(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	queue := asynq.NewClientFromRedisClient(rdb)
	srv := web.NewServer(log, cfg, web.Deps{
		Orders: orderService, Payments: pay, Refunds: a.refunds,
		Keys:     idempotency.New(db, time.Now, cfg.RequestTimeout),
		Products: catalog.NewService(db),
		Audit:    audit.New(db).RaisingAlerts(jobs.Tasks{}),
		Admins:   admins.NewService(db, time.Now),
		Sessions: web.NewSessions(postgresstore.NewWithCleanupInterval(sqlDB, 0), cfg),
		Stories:  story.New(db, jobs.Tasks{}),
		Stats:    stats.NewReader(db, time.Now),
		Jobs:     jobs.NewConsole(db, asynq.NewInspectorFromRedisClient(rdb), queue, time.Hour, m),
		Calls:    gatewaycalls.NewLedger(db, time.Now, m),
	})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	a.url = hs.URL
	a.deps = jobs.Deps{DB: db, Now: time.Now, Metrics: m, Orders: orderService, Refunds: a.refunds, Mailer: a.mailer,
		MailFrom: "Sekali <shop@example.com>", Guard: jobs.NewGuard(db, rdb, log, "books-worker", 30*time.Second, m)}
	return a
}

// reset empties every table but the migrations', and logs the owner in
// again: each run of the model starts from an empty shop.
func (a *app) reset(t tb) {
	t.Helper()
	// DELETE, not TRUNCATE: the tables hold a run's few rows, and
	// TRUNCATE makes new files for every table (200 ms a reset). The
	// foreign keys are not checked meanwhile (replica role), so the
	// order of the tables does not matter.
	var tables []string
	err := a.db.Raw(`SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version'`).Scan(&tables).Error
	if err == nil {
		err = a.db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SET LOCAL session_replication_role = replica").Error; err != nil {
				return err
			}
			for _, table := range tables {
				if err := tx.Exec("DELETE FROM " + table).Error; err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(booksPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if err := a.db.Create(&models.AdminUser{Email: booksAdmin, PasswordHash: string(hash), Role: models.RoleOwner}).Error; err != nil {
		t.Fatalf("reset: %v", err)
	}
	a.world.reset()
	a.mailer.reset()
	jar, _ := cookiejar.New(nil)
	a.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if r := a.do(t, "POST", "/admin/login", formHeader(), []byte(url.Values{"email": {booksAdmin}, "password": {booksPassword}}.Encode())); r.status != http.StatusSeeOther {
		t.Fatalf("log-in: %d %s", r.status, r.body)
	}
}

// answer is an HTTP answer.
type answer struct {
	status int
	body   []byte
}

// result is a callback's answer's result member and reason.
func (r answer) result() (string, string) {
	var v struct{ Result, Reason string }
	json.Unmarshal(r.body, &v)
	return v.Result, v.Reason
}

func formHeader() http.Header {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
}

// do sends one request to the web server.
func (a *app) do(t tb, method, path string, h http.Header, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	maps := h.Clone()
	if maps != nil {
		req.Header = maps
	}
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b}
}

// api sends a request of the admin API.
func (a *app) api(t tb, method, path, idempotencyKey string, body any) answer {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + booksToken}, "Content-Type": {"application/json"}}
	if idempotencyKey != "" {
		h.Set("Idempotency-Key", idempotencyKey)
	}
	b, _ := json.Marshal(body)
	return a.do(t, method, path, h, b)
}

// console posts a console form as the logged-in owner.
func (a *app) console(t tb, path string, form url.Values) answer {
	t.Helper()
	return a.do(t, "POST", path, formHeader(), []byte(form.Encode()))
}

// notify delivers the gateway's notification of f in provider's
// format, after its emulation learnt it (as the sandbox gateway does),
// and returns the answer and what Sekali reads in it.
func (a *app) notify(t tb, provider string, f payments.Fact) (answer, payments.Event) {
	t.Helper()
	s := a.senders[provider]
	h, body, err := payments.Notification(s, f, time.Now())
	if err != nil {
		t.Fatalf("the %s notification of %+v: %v", provider, f, err)
	}
	a.world.learn(provider, f, body)
	ev, err := a.parsers[provider].Parse(h, body)
	if err != nil {
		t.Fatalf("the %s notification of %+v does not parse: %v", provider, f, err)
	}
	return a.do(t, "POST", "/callbacks/"+provider, h, body), ev
}

// runTask runs outbox row m's job once, as a worker would.
func (a *app) runTask(t tb, m models.OutboxMessage, attempt int) jobs.RunOutcome {
	t.Helper()
	out, err := jobs.RunGuarded(context.Background(), a.deps, m, attempt)
	if out == "" {
		t.Fatalf("%s: %v", m.TaskID, err)
	}
	return out
}

// world is the gateways' side: each gateway's emulation of its API,
// served as the sandbox gateway serves it, with its fault switches, and
// the notifications the emulations would send, kept in the order they
// came until the test delivers them.
type world struct {
	mux *http.ServeMux
	emulation.Faults
	emulators map[string]payments.Emulator
	senders   map[string]payments.Sender

	mu     sync.Mutex
	queued []told
}

// told is a notification an emulation would send: the fact, in the
// format of provider.
type told struct {
	provider string
	fact     payments.Fact
}

func newWorld() *world {
	return &world{mux: http.NewServeMux(), emulators: map[string]payments.Emulator{}, senders: map[string]payments.Sender{}}
}

func (w *world) ServeHTTP(rw http.ResponseWriter, r *http.Request) { w.mux.ServeHTTP(rw, r) }

// emulate serves em's API below its path.
func (w *world) emulate(em payments.Emulator, sender payments.Sender) {
	w.emulators[em.Provider()] = em
	w.senders[em.Provider()] = sender
	w.mux.Handle(em.Path()+"/", http.StripPrefix(em.Path(), em.Handler(sandboxOf{w, em.Provider()})))
}

// learn tells provider's emulation what its notification f says — and,
// for a payment, the charge its refunds may take — as the sandbox
// gateway does before it sends one.
func (w *world) learn(provider string, f payments.Fact, body []byte) {
	em, ok := w.emulators[provider]
	if !ok {
		return
	}
	em.Notified(f, body)
	if f.Status == models.EventPaid {
		em.Reported(f)
	}
}

// take returns the kept notifications, oldest first, and forgets them.
func (w *world) take() []told {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queued
	w.queued = nil
	return q
}

func (w *world) reset() {
	w.take()
	w.FailNext(0)
	w.FailRefundsLater(0)
}

// sandboxOf is what the world gives the emulation of provider's API.
type sandboxOf struct {
	w        *world
	provider string
}

func (s sandboxOf) Call(rw http.ResponseWriter, r *http.Request, failed []byte, act func() (int, http.Header, []byte)) {
	s.w.Faults.Call(rw, r, failed, act)
}
func (s sandboxOf) FailLater() bool       { return s.w.Faults.FailLater() }
func (s sandboxOf) Delivered(string) bool { return false }
func (s sandboxOf) PayURL(*http.Request, string, string) string {
	return "http://sandbox.invalid/pay"
}

// Notify keeps the notifications for the test to deliver.
func (s sandboxOf) Notify(_ string, fs ...payments.Fact) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	for _, f := range fs {
		s.w.queued = append(s.w.queued, told{provider: s.provider, fact: f})
	}
}

// keptMailer keeps the messages the email job sends.
type keptMailer struct {
	mu   sync.Mutex
	sent []mail.Message
}

func (k *keptMailer) Send(_ context.Context, m mail.Message) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sent = append(k.sent, m)
	return nil
}

func (k *keptMailer) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sent = nil
}

// providers are the configured gateways that receive notifications, in
// a fixed order.
func (a *app) providers() []string {
	var ps []string
	for p := range a.senders {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}
