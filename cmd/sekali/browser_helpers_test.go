package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// The browser tests drive Debian's Chromium (/usr/bin/chromium; .ci/run
// installs it when it is missing) with chromedp against a real `sekali
// serve` from startApp. Each test has its own app and its own browser
// context (a tab in a context like a fresh profile) in the one Chromium of
// the test binary, so cookies never leak from one test to another.
//
// The console is opened at http://localhost:PORT, not 127.0.0.1: Chromium
// treats localhost as a secure context, so the Secure session cookie works
// over plain HTTP, as it does for an admin running `make run`.
//
// Every message the pages write to the browser's console is kept. A test
// fails on an uncaught exception, a console.error call, a Content Security
// Policy violation or any other error of the browser log, except the
// "Failed to load resource" lines of answers the test itself expects (a 401
// for a wrong password, a 403 for a refused cross-origin post). When a test
// fails, its log shows the page it was on, that page's text and every
// console message; SEKALI_TEST_LOG=1 adds the server's own log lines.

const (
	chromiumPath = "/usr/bin/chromium"

	testAdminEmail    = "admin@example.com"
	testAdminPassword = "correct horse battery staple"

	// screenshotDir is docs/screenshots, from the package directory.
	screenshotDir = "../../docs/screenshots"
)

// browser is one tab of the shared Chromium, in a browser context of its
// own, logged in or not, on one app.
type browser struct {
	t    *testing.T
	ctx  context.Context // the tab; no deadline (see chromedp.NewContext)
	base string          // http://localhost:PORT

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	expected []string // "status of 401": network errors the test expects
	shots    map[string][]byte
}

// chromium is the one headless Chromium of this test binary, started by
// the first browser test and stopped by TestMain: a browser per test cost
// each of them a Chromium start on a machine busy with every other test.
// Tests share nothing through it: each has a browser context of its own
// (newBrowser).
var chromium struct {
	once    sync.Once
	ctx     context.Context // its first tab: the browser's life
	stop    func()
	profile string
	err     error
}

// startChromium starts the shared Chromium once and returns its context.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	chromium.once.Do(func() {
		// Not t.TempDir: the profile outlives the test that started the
		// browser; stopChromium removes it.
		chromium.profile, chromium.err = os.MkdirTemp("", "sekali-chromium-")
		if chromium.err != nil {
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromiumPath),
			chromedp.NoSandbox, // the tests run as root in CI
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("no-first-run", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(chromium.profile),
			chromedp.WindowSize(1280, 900),
		)
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelTab := chromedp.NewContext(allocCtx)
		chromium.ctx = ctx
		chromium.stop = func() { cancelTab(); cancelAlloc() }
		// Start the browser on the context without a deadline: the first
		// Run binds the browser's life to its context.
		if err := chromedp.Do(ctx); err != nil {
			chromium.err = fmt.Errorf("start %s: %v", chromiumPath, err)
		}
	})
	if chromium.err != nil {
		t.Fatal(chromium.err)
	}
	return chromium.ctx
}

// stopChromium stops the shared Chromium, if a test started it, and
// removes its profile.
func stopChromium() {
	if chromium.stop == nil {
		return
	}
	chromium.stop()
	for range 50 {
		if os.RemoveAll(chromium.profile) == nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling: Chromium's helpers may still be exiting
	}
}

// newBrowser opens a tab for a in a browser context of its own (cookies,
// storage and cache of its own, like a fresh profile) in the shared
// Chromium, closed when the test ends.
func newBrowser(t *testing.T, a *testApp) *browser {
	t.Helper()
	u, err := url.Parse(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://localhost:" + u.Port()

	ctx, cancelTab := chromedp.NewContext(startChromium(t), chromedp.WithNewBrowserContext())
	b := &browser{t: t, ctx: ctx, base: base, shots: map[string][]byte{}}
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		t.Fatalf("open a tab in %s: %v", chromiumPath, err)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, m)
			b.mu.Unlock()
		}
	}()

	t.Cleanup(func() {
		b.checkConsole()
		if t.Failed() {
			b.dumpState()
		}
		cancelTab()
		<-done
		if !t.Failed() {
			b.writeScreenshots()
		}
	})
	return b
}

// expectNetworkError lets the browser log "Failed to load resource: the
// server responded with a status of <status>" without failing the test.
func (b *browser) expectNetworkError(status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected = append(b.expected, fmt.Sprintf("status of %d", status))
}

// checkConsole fails the test on every console message that is an error.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.messages {
		if !b.isProblem(m) {
			continue
		}
		where := m.URL
		if where != "" {
			where = fmt.Sprintf(" (%s:%d:%d)", m.URL, m.Line+1, m.Column+1)
		}
		b.t.Errorf("browser console: %s%s", m, where)
	}
}

func (b *browser) isProblem(m chromedp.ConsoleMessage) bool {
	if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
		return true
	}
	if m.Type != chromedp.ConsoleError {
		return false
	}
	if m.Source == "network" {
		for _, e := range b.expected {
			if strings.Contains(m.Text, e) {
				return false
			}
		}
	}
	return true
}

// dumpState logs where the browser was when the test failed.
func (b *browser) dumpState() {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if len(text) > 4000 {
		text = text[:4000] + "…"
	}
	b.t.Logf("browser was at %s; the page said:\n%s", loc, text)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.messages {
		b.t.Logf("browser console: %s", m)
	}
}

// do runs browser steps, failing the test on an error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.Budget(b.t))
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// browserRun runs one browser step that has a value.
func browserRun[T any](b *browser, what string, step chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.Budget(b.t))
	defer cancel()
	v, err := chromedp.Run(ctx, step)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// open loads path (a path of the app, or a whole URL) and returns the
// status of the document's answer (after redirects).
func (b *browser) open(path string) int64 {
	b.t.Helper()
	if strings.HasPrefix(path, "/") {
		path = b.base + path
	}
	res := browserRun(b, "open "+path, chromedp.NavigateResponse(path))
	return res.Status
}

// follow runs steps that load a new page — a click on a link or a submit
// button — waits for it and returns the status of its document.
func (b *browser) follow(what string, steps ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.Budget(b.t))
	defer cancel()
	res, err := chromedp.RunResponse(ctx, steps...)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return res.Status
}

// location is the page's URL without the scheme and host.
func (b *browser) location() string {
	b.t.Helper()
	loc := browserRun(b, "read the location", chromedp.Location())
	return strings.TrimPrefix(loc, b.base)
}

// text is the visible text of the first element matching css.
func (b *browser) text(css string) string {
	b.t.Helper()
	return strings.TrimSpace(browserRun(b, "read "+css, chromedp.Text(chromedp.CSS(css))))
}

// browserEval evaluates a JavaScript expression in the page.
func browserEval[T any](b *browser, what, js string) T {
	b.t.Helper()
	return browserRun(b, what, chromedp.Evaluate[T](js))
}

// waitFor polls the JavaScript condition cond in the page until it is
// truthy, for up to the test's budget (testenv.Budget): a live region
// refreshes every 5 s, a job that failed on a busy machine runs again
// after 1 s, 2 s, 4 s, …. On a timeout the test fails with what and the
// value of the JavaScript expression state.
func (b *browser) waitFor(what, cond, state string) {
	b.t.Helper()
	budget := testenv.Budget(b.t)
	ctx, cancel := context.WithTimeout(b.ctx, budget+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(budget)))
	if err != nil {
		now, _ := chromedp.Run(ctx, chromedp.Evaluate[[]byte](state))
		b.t.Fatalf("waiting %s for %s: %v; the page shows %s", budget.Round(time.Second), what, err, now)
	}
}

// markPage sets a marker on the page's window, after checking that htmx
// runs on it; assertNotReloaded then checks that the page is still the
// same document, so a change seen since came from a live region, not a
// reload.
func (b *browser) markPage() {
	b.t.Helper()
	ok := browserEval[bool](b, "mark the page", `typeof htmx === "object" && (window.__sekaliMarker = "still here") === "still here"`)
	if !ok {
		b.t.Fatal("htmx is not loaded on the page, so nothing refreshes itself")
	}
}

func (b *browser) assertNotReloaded() {
	b.t.Helper()
	if !browserEval[bool](b, "check the marker", `window.__sekaliMarker === "still here"`) {
		b.t.Fatal("the page was reloaded: its live region was expected to change in place")
	}
}

// screenshot keeps a full-page PNG of the current page, written to
// docs/screenshots/<name>.png if the test passes and SEKALI_SCREENSHOTS
// is set (a plain test run leaves the tree as it was).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := browserRun(b, "screenshot "+name, chromedp.FullScreenshot(100))
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shots[name] = png
}

func (b *browser) writeScreenshots() {
	if len(b.shots) == 0 || os.Getenv("SEKALI_SCREENSHOTS") == "" {
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		b.t.Errorf("screenshots: %v", err)
		return
	}
	for name, png := range b.shots {
		path := filepath.Join(screenshotDir, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			b.t.Errorf("screenshot %s: %v", name, err)
		}
	}
}

// ensureAdmin creates the console's admin in a's database.
//
// Its password is hashed at bcrypt's lowest cost: under the race detector,
// on a busy machine, checking the production cost took more than the
// request's deadline (a log-in answered 503 after 10 s), and what these
// tests drive is the console, not bcrypt's cost (admins' own tests and
// `sekali seed` use that).
func ensureAdmin(t *testing.T, a *testApp) {
	t.Helper()
	addAdmin(t, a, testAdminEmail, models.RoleOwner)
}

// addAdmin creates an admin with role and the test password (at bcrypt's
// lowest cost, as ensureAdmin says why), unless the email has one.
func addAdmin(t *testing.T, a *testApp, email string, role models.AdminRole) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(testAdminPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	err = a.DB.Clauses(clause.OnConflict{DoNothing: true}).Create(&models.AdminUser{Email: email, PasswordHash: string(hash), Role: role}).Error
	if err != nil {
		t.Fatalf("create the admin %s: %v", email, err)
	}
}

// logIn fills in and submits the log-in form, and returns the status of
// the page it leads to.
func (b *browser) logIn(email, password string) int64 {
	b.t.Helper()
	b.open("/admin/login")
	b.do("fill in the log-in form",
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password))
	return b.follow("submit the log-in form", chromedp.Click(chromedp.CSS(`form[action="/admin/login"] button[type="submit"]`)))
}

// loggedInBrowser is a browser on a logged in to the console as its admin,
// on the dashboard.
func loggedInBrowser(t *testing.T, a *testApp) *browser {
	t.Helper()
	ensureAdmin(t, a)
	b := newBrowser(t, a)
	if st := b.logIn(testAdminEmail, testAdminPassword); st != http.StatusOK || b.location() != "/admin" {
		t.Fatalf("log in: status %d at %s; want 200 at /admin", st, b.location())
	}
	return b
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// statJS finds the value of the stat card whose label is label (any case).
const statJS = `(label => {
	for (const s of document.querySelectorAll(".stat")) {
		const l = s.querySelector(".label"), v = s.querySelector(".value");
		if (l && v && l.textContent.trim().toLowerCase() === label.toLowerCase()) return v.textContent.trim();
	}
	return null;
})`

// jsStat is the JavaScript expression of a stat card's value.
func jsStat(label string) string { return statJS + "(" + jsString(label) + ")" }

// smtpSwitch is an SMTP front of the test's own: while it refuses, every
// session gets "554" at once, as from a mail server that is down for
// maintenance; once healed, it passes sessions to a real SMTP server.
// refuse also ends the sessions it is passing, as a server going down
// does: the app keeps sessions open between messages.
type smtpSwitch struct {
	addr     string
	upstream string

	mu       sync.Mutex
	refusing bool
	passing  map[net.Conn]bool // the sessions it is passing on
}

func startSMTPSwitch(t *testing.T, upstream string) *smtpSwitch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSwitch{addr: ln.Addr().String(), upstream: upstream, refusing: true, passing: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	wg.Add(1) // the accept loop; each session adds itself while it runs
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return s
}

func (s *smtpSwitch) URL() string { return "smtp://" + s.addr }

func (s *smtpSwitch) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = false
}

func (s *smtpSwitch) refuse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = true
	for c := range s.passing {
		c.Close()
	}
}

func (s *smtpSwitch) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	s.mu.Lock()
	refusing := s.refusing
	if !refusing {
		s.passing[c] = true
	}
	s.mu.Unlock()
	if refusing {
		io.WriteString(c, "554 5.3.2 Service unavailable, try again later\r\n")
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.passing, c)
		s.mu.Unlock()
	}()
	up, err := net.DialTimeout("tcp", s.upstream, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
}

// Widths the console is drawn for: a desktop's window and a phone's.
const (
	desktopWidth = 1280
	phoneWidth   = 390
)

// atWidth reloads the page in a window width px wide and checks that
// it does not scroll sideways: no part of it is wider than the window.
func (b *browser) atWidth(width int64) {
	b.t.Helper()
	b.do(fmt.Sprintf("a window %d px wide", width), chromedp.EmulateViewport(width, 900), chromedp.Reload())
	b.waitFor("the page reloaded", `document.readyState === "complete"`, `document.readyState`)
	wide := browserEval[[]float64](b, "the page's width", `[document.documentElement.scrollWidth, window.innerWidth]`)
	if wide[0] > wide[1] {
		b.t.Errorf("%s at %d px: the page is %.0f px wide, wider than the window (%.0f px): it scrolls sideways",
			b.location(), width, wide[0], wide[1])
	}
}

// offScreenJS lists the buttons of the element css that lie, wholly or
// in part, outside the window's width or outside the table that scrolls
// sideways around them (cut at its edge).
const offScreenJS = `(css => [...document.querySelectorAll(css + " button, " + css + " .button")]
	.filter(e => {
		const r = e.getBoundingClientRect();
		if (r.width === 0) return false;
		const wrap = e.closest(".table-wrap"), w = wrap ? wrap.getBoundingClientRect() : {left: 0, right: window.innerWidth};
		return r.left < Math.max(0, w.left) || r.right > Math.min(window.innerWidth, w.right);
	})
	.map(e => e.textContent.trim()))`
