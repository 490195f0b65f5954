package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// consolePages are every page of the console an admin can GET.
var consolePages = []string{
	"/admin", "/admin/callbacks", "/admin/deliveries", "/admin/orders", "/admin/jobs", "/admin/outbox",
	"/admin/products", "/admin/audit", "/admin/catch-up", "/admin/actions", "/admin/help", "/admin/orders/ORD-x", "/admin/callbacks/1",
}

// Without a session, every console page sends the browser to the log-in
// page, which brings it back afterwards; htmx is told where to go.
func TestConsoleNeedsLogIn(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for _, path := range consolePages {
		p := c.get(path)
		want := "/admin/login?next=" + url.QueryEscape(path)
		if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d Location=%q, want 303 to %s", path, p.StatusCode, p.Header.Get("Location"), want)
		}
	}
	p := c.do(c.client, "GET", "/admin/callbacks", nil, http.Header{"HX-Request": {"true"}})
	if p.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(p.Header.Get("HX-Redirect"), "/admin/login") {
		t.Errorf("htmx GET without a session: %d HX-Redirect=%q, want 401 and a redirect", p.StatusCode, p.Header.Get("HX-Redirect"))
	}
	if p := c.post("/admin/orders/ORD-x/cancel", nil); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/login" {
		t.Errorf("POST without a session: %d Location=%q, want 303 to /admin/login", p.StatusCode, p.Header.Get("Location"))
	}
	// After logging in, the page asked for first is where the admin lands.
	p = c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}, "next": {"/admin/jobs?status=failed"}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/jobs?status=failed" {
		t.Errorf("log-in with next: %d Location=%q", p.StatusCode, p.Header.Get("Location"))
	}
	for _, path := range consolePages[:10] {
		if p := c.get(path); p.StatusCode != http.StatusOK {
			t.Errorf("GET %s logged in: %d\n%s", path, p.StatusCode, p.Body)
		}
	}
}

// A redirect after log-in stays inside the console.
func TestLogInNextStaysInTheConsole(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for _, next := range []string{"https://evil.example/admin", "//evil.example/admin", "/\\evil.example", "/shop", "/admin/login", "javascript:alert(1)"} {
		client := c.newClient()
		p := c.do(client, "POST", "/admin/login", strings.NewReader(url.Values{"email": {adminEmail}, "password": {adminPassword}, "next": {next}}.Encode()),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
		if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin" {
			t.Errorf("next=%q: %d Location=%q, want /admin", next, p.StatusCode, p.Header.Get("Location"))
		}
	}
}

// An unknown email and a wrong password get the same answer.
func TestLogInFailsAlikeForUnknownEmailAndWrongPassword(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	wrong := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {"nope"}})
	unknown := c.post("/admin/login", url.Values{"email": {"nobody@example.com"}, "password": {"nope"}})
	for name, p := range map[string]page{"wrong password": wrong, "unknown email": unknown} {
		if p.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, p.StatusCode)
		}
		if got := p.Doc(t).Find(".flash.bad").Text(); got != "Wrong email or password." {
			t.Errorf("%s: message %q", name, got)
		}
		// The email is kept and the password field has the focus: the
		// admin types the password again, not the email.
		if focus := p.Doc(t).Find("input[autofocus]"); focus.Length() != 1 || focus.AttrOr("name", "") != "password" {
			t.Errorf("%s: the focus goes to %q, want the password", name, focus.AttrOr("name", ""))
		}
		if len(p.Response.Cookies()) > 0 && p.Response.Cookies()[0].Value != "" && strings.Contains(p.Body, "Log out") {
			t.Errorf("%s: logged in", name)
		}
	}
	if c.get("/admin").StatusCode != http.StatusSeeOther {
		t.Error("a failed log-in opened the console")
	}
	var failures, refused int64
	c.db.Model(&models.LoginFailure{}).Count(&failures)
	c.db.Model(&models.AdminAction{}).Where("action = 'login' AND result = 'refused'").Select("coalesce(sum(count), 0)").Scan(&refused)
	if failures != 2 || refused != 2 {
		t.Errorf("recorded %d failures and %d refused log-ins, want 2 and 2 (in the address's one row)", failures, refused)
	}
}

// After admins.MaxFailures failures for one email, or from one client
// address, log-ins answer 429 with Retry-After — counted in PostgreSQL,
// so a second web process (here: a second server on the same database)
// refuses too. A success forgets the email's failures.
func TestLogInIsThrottled(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for i := range admins.MaxFailures {
		if p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {"guess " + strconv.Itoa(i)}}); p.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d", i+1, p.StatusCode)
		}
	}
	p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
	if p.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right password after %d failures: status %d, want 429", admins.MaxFailures, p.StatusCode)
	}
	retry, err := strconv.Atoi(p.Header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > int(admins.FailureWindow.Seconds()) {
		t.Errorf("Retry-After = %q, want seconds within the window", p.Header.Get("Retry-After"))
	}
	// The same database behind another server: the count holds there too.
	other := newConsoleOn(t, c)
	if p := other.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}}); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second server: status %d, want 429", p.StatusCode)
	}
	// Another email from the same address is refused too: the address
	// has failed five times.
	if p := c.post("/admin/login", url.Values{"email": {"other@example.com"}, "password": {"x"}}); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("other email from the same address: status %d, want 429", p.StatusCode)
	}
	// Once the failures have aged out, the right password opens.
	if err := c.db.Exec("UPDATE admin_login_failures SET failed_at = failed_at - interval '16 minutes'").Error; err != nil {
		t.Fatal(err)
	}
	c.login()
}

// newConsoleOn is a second server on the first one's database (a second
// web process).
func newConsoleOn(t *testing.T, first *console) *console {
	return newConsoleWithDB(t, first.db)
}

// Log-in gives a new session token (an attacker who planted one gains
// nothing); log-out destroys the session, so a copied cookie opens
// nothing afterwards.
func TestSessionTokenRenewedAtLogInAndDestroyedAtLogOut(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	u, _ := url.Parse(c.URL + "/admin")
	c.client.Jar.SetCookies(u, []*http.Cookie{{Name: "sekali_admin", Value: "planted-by-an-attacker", Path: "/admin"}})
	c.login()
	var token string
	for _, ck := range c.client.Jar.Cookies(u) {
		if ck.Name == "sekali_admin" {
			token = ck.Value
		}
	}
	if token == "" || token == "planted-by-an-attacker" {
		t.Fatalf("session token after log-in = %q, want a new one", token)
	}
	copied := c.newClient()
	copied.Jar.SetCookies(u, []*http.Cookie{{Name: "sekali_admin", Value: token, Path: "/admin"}})
	if p := c.do(copied, "GET", "/admin", nil, nil); p.StatusCode != http.StatusOK {
		t.Fatalf("the copied cookie before log-out: %d, want 200", p.StatusCode)
	}
	if p := c.post("/admin/logout", nil); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/login" {
		t.Fatalf("log-out: %d Location=%q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := c.do(copied, "GET", "/admin", nil, nil); p.StatusCode != http.StatusSeeOther {
		t.Errorf("the old cookie after log-out: %d, want a redirect to the log-in page", p.StatusCode)
	}
	var n int64
	c.db.Model(&models.AdminAction{}).Where("action IN ('login', 'logout') AND result = 'ok'").Count(&n)
	if n != 2 {
		t.Errorf("%d log-in/log-out actions recorded, want 2", n)
	}
}

// The session cookie is HttpOnly, SameSite=Lax, limited to /admin, and
// Secure unless COOKIE_SECURE=false.
func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		c := newConsole(t, func(cfg *config.Config) { cfg.CookieSecure = secure })
		p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
		var cookie *http.Cookie
		for _, ck := range p.Response.Cookies() {
			if ck.Name == "sekali_admin" {
				cookie = ck
			}
		}
		if cookie == nil {
			t.Fatalf("secure=%v: no session cookie set at log-in", secure)
		}
		if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/admin" || cookie.Secure != secure {
			t.Errorf("secure=%v: cookie HttpOnly=%v SameSite=%v Path=%q Secure=%v", secure, cookie.HttpOnly, cookie.SameSite, cookie.Path, cookie.Secure)
		}
	}
}

// Every /admin answer carries the security headers, the log-in page too.
func TestConsoleSecurityHeaders(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	check := func(name string, p page) {
		h := p.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", name, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP allows inline code: %q", name, csp)
		}
		for header, want := range map[string]string{
			"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
		} {
			if got := h.Get(header); got != want {
				t.Errorf("%s: %s = %q, want %q", name, header, got, want)
			}
		}
	}
	check("log-in page", c.get("/admin/login"))
	c.login()
	check("dashboard", c.get("/admin"))
	check("404", c.get("/admin/orders/ORD-none"))
	// The pages themselves carry no inline script or style (the CSP would
	// block them): scripts come from /static, styles from the stylesheet.
	doc := c.get("/admin").Doc(t)
	doc.Find("script").Each(func(_ int, s *goquery.Selection) {
		if src, _ := s.Attr("src"); src == "" || !strings.HasPrefix(src, "/static/") {
			t.Errorf("inline or foreign script: %s", s.Text())
		}
	})
	if n := doc.Find("[style], style").Length(); n > 0 {
		t.Errorf("%d inline styles", n)
	}
}

// A state-changing request from another origin is refused (403) and
// changes nothing; the same request from the console's own page works.
func TestCrossOriginPostsAreRefused(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "CSRF", 1000, 10)
	o := c.newOrder("CSRF", 1)
	path := "/admin/orders/" + o.ID + "/cancel"
	for name, h := range map[string]http.Header{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": {"cross-site"}},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": {"same-site"}}, // another port of the same host
		"Origin of another site":    {"Origin": {"http://evil.example"}},
	} {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		p := c.do(c.client, "POST", path, strings.NewReader(""), h)
		if p.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, p.StatusCode)
		}
	}
	if p := c.do(c.client, "POST", "/admin/logout", strings.NewReader(""), http.Header{"Sec-Fetch-Site": {"cross-site"}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site log-out: status %d, want 403", p.StatusCode)
	}
	var got models.Order
	c.db.Take(&got, "id = ?", o.ID)
	if got.Status != models.OrderPending {
		t.Fatalf("a refused request changed the order to %s", got.Status)
	}
	if p := c.post(path, url.Values{"confirm": {"yes"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("same-origin cancel: %d\n%s", p.StatusCode, p.Body)
	}
	c.db.Take(&got, "id = ?", o.ID)
	if got.Status != models.OrderCancelled {
		t.Errorf("same-origin cancel left the order %s", got.Status)
	}
}

// The JSON twins of the console's pages answer only with the admin token.
func TestAdminAPIJSONTwin(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for _, path := range []string{"/api/admin", "/api/admin/callbacks", "/api/admin/orders", "/api/admin/jobs", "/api/admin/deliveries",
		"/api/admin/outbox", "/api/admin/products", "/api/admin/actions"} {
		p := c.do(http.DefaultClient, "GET", path, nil, http.Header{"Accept": {"application/json"}})
		if p.StatusCode != http.StatusUnauthorized || p.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s without the token: %d %s", path, p.StatusCode, p.Header.Get("Content-Type"))
		}
		p = c.api(path)
		var v map[string]any
		if p.StatusCode != http.StatusOK || json.Unmarshal([]byte(p.Body), &v) != nil {
			t.Errorf("%s with the token: %d %.200s", path, p.StatusCode, p.Body)
		}
	}
	// Without a token configured, the admin API does not exist.
	off := newConsole(t, func(cfg *config.Config) { cfg.AdminAPIToken = "" })
	if p := off.api("/api/admin/orders"); p.StatusCode != http.StatusNotFound {
		t.Errorf("no ADMIN_API_TOKEN: %d, want 404", p.StatusCode)
	}
}

// 25 guesses sent at once from one address: each is counted before its
// password is checked, so MaxFailures of them are answered 401 (one
// bcrypt each) and the rest 429; the right password afterwards is 429
// too, where guesses checked before they are counted would give 24 × 401
// and then a log-in.
func TestConcurrentGuessesAreThrottled(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	began := time.Now()
	statuses := make([]int, 25)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range statuses {
		wg.Go(func() {
			<-start
			statuses[i] = c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {"guess " + strconv.Itoa(i)}}).StatusCode
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[http.StatusUnauthorized] != admins.MaxFailures || counts[http.StatusTooManyRequests] != len(statuses)-admins.MaxFailures {
		t.Errorf("25 concurrent guesses: %v; want %d × 401 and the rest 429", counts, admins.MaxFailures)
	}
	if p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}}); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the right password after the storm: %d, want 429", p.StatusCode)
	}
	// One row per address and window: two if the test ran across the
	// turn of a window.
	windows := 1
	if !began.Truncate(admins.FailureWindow).Equal(time.Now().Truncate(admins.FailureWindow)) {
		windows = 2
	}
	var rows []models.AdminAction
	c.db.Find(&rows, "action = 'login' AND result = 'refused'")
	total := 0
	for _, r := range rows {
		total += r.Count
	}
	if len(rows) != windows || total != len(statuses)+1 {
		t.Errorf("refused log-ins logged as %d rows counting %d; want %d row(s) counting %d", len(rows), total, windows, len(statuses)+1)
	}
}

// An email of 3,000 characters or a password of 2 KB is refused with the
// form's message (422), without a hash compared, and counted, so that
// overlong guesses cost no bcrypt and are throttled like the others.
func TestOverlongLogInIsRefusedAndCounted(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for i, form := range []url.Values{
		{"email": {strings.Repeat("a", 3000) + "@example.com"}, "password": {"x"}},
		{"email": {adminEmail}, "password": {strings.Repeat("p", 2048)}},
	} {
		p := c.post("/admin/login", form)
		if p.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p.Doc(t).Find(".flash, .field-error, form").Text(), "at most 254 characters") {
			t.Errorf("over-long input %d: %d, want 422 with the form's message", i+1, p.StatusCode)
		}
	}
	var failures int64
	c.db.Model(&models.LoginFailure{}).Count(&failures)
	if failures != 2 {
		t.Errorf("%d failures counted, want 2", failures)
	}
}
