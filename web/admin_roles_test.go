package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// addAdmin makes an admin with role and returns a client logged in as them.
func (c *console) addAdmin(email string, role models.AdminRole) *http.Client {
	c.t.Helper()
	return c.loginAs(email, role).client
}

// postWith is post from another browser.
func (c *console) postWith(client *http.Client, path string, form url.Values) page {
	return c.do(client, "POST", path, strings.NewReader(form.Encode()), http.Header{
		"Content-Type":   {"application/x-www-form-urlencoded"},
		"Sec-Fetch-Site": {"same-origin"},
		"Origin":         {c.URL},
	})
}

// routeParam fills a route's parameters with values of the right shape.
var routeParam = regexp.MustCompile(`:[a-z]+|\*`)

// A viewer's session gets 403 on every request of the console that is
// not a read — every route the server has, found from its route table,
// so that a route added later is checked too — except log-out and their
// own account. Nothing is changed: the restock they tried left the stock
// as it was.
func TestViewerIsRefusedEveryConsoleAction(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "DEMO-TEE", 150000, 10)
	viewer := c.addAdmin("viewer@example.com", models.RoleViewer)
	own := map[string]bool{"/admin/login": true, "/admin/login/code": true, "/admin/invite/:token": true,
		"/admin/logout": true, "/admin/account/password": true, "/admin/account/mfa": true, "/admin/account/mfa/remove": true}
	var before models.Product
	c.db.Take(&before, "sku = ?", "DEMO-TEE")
	checked := 0
	for _, r := range c.srv.Routes() {
		if !strings.HasPrefix(r.Path, "/admin") || own[r.Path] || r.Method == http.MethodGet || r.Method == http.MethodHead ||
			r.Method == "CONNECT" || r.Method == "TRACE" || r.Method == "OPTIONS" || r.Path == "/admin/*" {
			continue
		}
		path := routeParam.ReplaceAllStringFunc(r.Path, func(p string) string {
			if p == ":sku" {
				return "DEMO-TEE"
			}
			return "1"
		})
		p := c.do(viewer, r.Method, path, strings.NewReader("quantity=5&reason=test&role=owner&email=x%40example.com"), http.Header{
			"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {c.URL},
		})
		if p.StatusCode != http.StatusForbidden {
			t.Errorf("a viewer's %s %s: %d, want 403", r.Method, path, p.StatusCode)
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("only %d console actions found in the route table", checked)
	}
	var after models.Product
	c.db.Take(&after, "sku = ?", "DEMO-TEE")
	if after.Stock != before.Stock {
		t.Errorf("a viewer's restock changed the stock from %d to %d", before.Stock, after.Stock)
	}
	if p := c.do(viewer, "GET", "/admin/orders", nil, nil); p.StatusCode != http.StatusOK {
		t.Errorf("a viewer cannot read the orders: %d", p.StatusCode)
	}
	if p := c.postWith(viewer, "/admin/logout", nil); p.StatusCode != http.StatusSeeOther {
		t.Errorf("a viewer cannot log out: %d", p.StatusCode)
	}
}

// A viewer sees customers' emails masked, on pages and in JSON alike; the
// admins' own emails stay readable. An owner sees them whole.
func TestViewerSeesCustomerEmailsMasked(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "DEMO-TEE", 150000, 10)
	o := c.newOrder("DEMO-TEE", 1)
	c.login()
	viewer := c.addAdmin("viewer@example.com", models.RoleViewer)
	for _, path := range []string{"/admin/orders", "/admin/orders/" + o.ID, "/admin/orders?email=buyer%40example.com"} {
		for _, accept := range []string{"text/html", "application/json"} {
			p := c.do(viewer, "GET", path, nil, http.Header{"Accept": {accept}})
			if p.StatusCode != http.StatusOK {
				t.Fatalf("viewer GET %s (%s): %d", path, accept, p.StatusCode)
			}
			if strings.Contains(p.Body, "buyer@example.com") || strings.Contains(p.Body, "buyer%40example.com") {
				t.Errorf("viewer GET %s (%s) shows the customer's email", path, accept)
			}
			if !strings.Contains(p.Body, "b***@e***.com") && !strings.Contains(p.Body, "b***%40e***.com") {
				t.Errorf("viewer GET %s (%s) does not show the masked email", path, accept)
			}
		}
	}
	if p := c.do(viewer, "GET", "/admin", nil, nil); !strings.Contains(p.Body, "viewer@example.com") {
		t.Error("the viewer's own email is masked in the top bar")
	}
	if p := c.get("/admin/orders/" + o.ID); !strings.Contains(p.Body, "buyer@example.com") {
		t.Error("an owner does not see the customer's email")
	}
}

// Only an owner manages admins: an operator gets 403 on the page and on
// an invitation.
func TestOnlyOwnersManageAdmins(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	operator := c.addAdmin("op@example.com", models.RoleOperator)
	if p := c.do(operator, "GET", "/admin/admins", nil, nil); p.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's GET /admin/admins: %d, want 403", p.StatusCode)
	}
	if p := c.postWith(operator, "/admin/admins/invite", url.Values{"email": {"x@example.com"}, "role": {"owner"}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's invitation: %d, want 403", p.StatusCode)
	}
	var n int64
	c.db.Model(&models.AdminInvitation{}).Count(&n)
	if n != 0 {
		t.Errorf("%d invitations made by an operator", n)
	}
}

var inviteLink = regexp.MustCompile(`/admin/invite/[A-Za-z0-9_-]{43}`)

// An owner invites an operator; the link opens one account once; the new
// admin logs in as an operator; disabled by the owner, their session
// ends at its next request.
func TestInvitationToDisabling(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	p := c.post("/admin/admins/invite", url.Values{"email": {"New.Op@Example.com"}, "role": {"operator"}})
	link := inviteLink.FindString(p.Body)
	if p.StatusCode != http.StatusOK || link == "" {
		t.Fatalf("invite: %d, link %q\n%s", p.StatusCode, link, p.Body)
	}
	if got := c.get("/admin/admins"); inviteLink.MatchString(got.Body) {
		t.Error("the admins page shows the invitation link again")
	}
	newcomer := c.newClient()
	if p := c.do(newcomer, "GET", link, nil, nil); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "new.op@example.com") {
		t.Fatalf("the invitation's page: %d\n%s", p.StatusCode, p.Body)
	}
	if p := c.postWith(newcomer, link, url.Values{"password": {"short"}, "confirm": {"short"}}); p.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a short password: %d, want 422", p.StatusCode)
	}
	p = c.postWith(newcomer, link, url.Values{"password": {"a long new password"}, "confirm": {"a long new passwort"}})
	if p.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p.Doc(t).Find(".flash.bad").Text(), "the two passwords differ") {
		t.Errorf("a confirmation that differs: %d %q, want 422 saying so", p.StatusCode, p.Doc(t).Find(".flash.bad").Text())
	}
	if p := c.postWith(newcomer, link, url.Values{"password": {"a long new password"}, "confirm": {"a long new password"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept: %d\n%s", p.StatusCode, p.Body)
	}
	// The log-in page it is sent to is for an admin, not about making the first one.
	if p := c.do(newcomer, "GET", "/admin/login", nil, nil); strings.Contains(p.Body, "sekali seed") {
		t.Error("the invited admin's log-in page talks about sekali seed")
	}
	if p := c.postWith(c.newClient(), link, url.Values{"password": {"another long password"}, "confirm": {"another long password"}}); p.StatusCode != http.StatusNotFound {
		t.Errorf("the link used again: %d, want 404", p.StatusCode)
	}
	if p := c.postWith(newcomer, "/admin/login", url.Values{"email": {"new.op@example.com"}, "password": {"a long new password"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("the new admin's log-in: %d", p.StatusCode)
	}
	var u models.AdminUser
	c.db.Take(&u, "email = ?", "new.op@example.com")
	if u.Role != models.RoleOperator {
		t.Errorf("the new admin is %s, want operator", u.Role)
	}
	if p := c.post("/admin/admins/"+strconv.FormatInt(u.ID, 10)+"/disable", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable: %d\n%s", p.StatusCode, p.Body)
	}
	if p := c.do(newcomer, "GET", "/admin", nil, nil); p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/admin/login") {
		t.Errorf("a disabled admin's session: %d %s, want a redirect to log in", p.StatusCode, p.Header.Get("Location"))
	}
	var actions int64
	c.db.Model(&models.AdminAction{}).Where("admin_email = ? AND action IN ?", adminEmail, []string{"invite admin", "disable admin"}).Count(&actions)
	if actions != 2 {
		t.Errorf("%d of the owner's actions logged, want 2", actions)
	}
}

// An admin sets up a second factor from their account page; the next
// log-in asks for its code after the password, and a code is accepted
// once.
func TestLogInWithASecondFactor(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	p := c.get("/admin/account")
	secret := p.Doc(t).Find("code.mono").First().Text()
	if p.StatusCode != http.StatusOK || secret == "" {
		t.Fatalf("account page: %d, secret %q", p.StatusCode, secret)
	}
	code := func(at time.Time) string {
		s, err := totp.GenerateCode(secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if p := c.post("/admin/account/mfa", url.Values{"code": {"123"}}); p.StatusCode != http.StatusUnprocessableEntity && p.StatusCode != http.StatusUnauthorized {
		t.Errorf("a bad code: %d", p.StatusCode)
	}
	if p := c.post("/admin/account/mfa", url.Values{"code": {code(time.Now())}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("set up: %d\n%s", p.StatusCode, p.Body)
	}
	browser := c.newClient()
	p = c.postWith(browser, "/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}, "next": {"/admin/orders"}})
	if p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/admin/login/code") {
		t.Fatalf("password step: %d %s", p.StatusCode, p.Header.Get("Location"))
	}
	if p := c.do(browser, "GET", "/admin", nil, nil); p.StatusCode != http.StatusSeeOther {
		t.Errorf("the console before the code: %d, want a redirect to log in", p.StatusCode)
	}
	if p := c.postWith(browser, "/admin/login/code", url.Values{"code": {"000000"}}); p.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong code: %d, want 401", p.StatusCode)
	}
	// The set-up used this step's code: the next step's is accepted (one
	// step of drift is).
	next := code(time.Now().Add(30 * time.Second))
	p = c.postWith(browser, "/admin/login/code", url.Values{"code": {next}, "next": {"/admin/orders"}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/orders" {
		t.Fatalf("code step: %d %s\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
	if p := c.do(browser, "GET", "/admin/orders", nil, nil); p.StatusCode != http.StatusOK {
		t.Errorf("after the code: %d", p.StatusCode)
	}
	other := c.newClient()
	c.postWith(other, "/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
	if p := c.postWith(other, "/admin/login/code", url.Values{"code": {next}}); p.StatusCode != http.StatusUnauthorized {
		t.Errorf("the same code again: %d, want 401", p.StatusCode)
	}
}

// With ADMIN_MFA=required an owner without a second factor is sent to set
// one up, and may do nothing else.
func TestOwnersMustSetUpASecondFactorWhenRequired(t *testing.T) {
	t.Parallel()
	c := newConsole(t, func(cfg *config.Config) { cfg.AdminMFARequired = true })
	testenv.MustCreateProduct(t, c.db, "DEMO-TEE", 150000, 10)
	c.login()
	if p := c.get("/admin/orders"); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/account" {
		t.Errorf("an owner without a second factor: %d %s, want a redirect to /admin/account", p.StatusCode, p.Header.Get("Location"))
	}
	if p := c.post("/admin/products/DEMO-TEE/restock", url.Values{"quantity": {"5"}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("an action: %d, want 403", p.StatusCode)
	}
	if p := c.get("/admin/account"); p.StatusCode != http.StatusOK {
		t.Errorf("the account page: %d", p.StatusCode)
	}
	operator := c.addAdmin("op@example.com", models.RoleOperator)
	if p := c.do(operator, "GET", "/admin/orders", nil, nil); p.StatusCode != http.StatusOK {
		t.Errorf("an operator (the rule is for owners): %d", p.StatusCode)
	}
}

// Changing the password needs the current one.
func TestChangePasswordInTheConsole(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	if p := c.post("/admin/account/password", url.Values{"current": {"wrong"}, "password": {"a long new password"},
		"confirm": {"a long new password"}}); p.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("with a wrong current password: %d, want 422", p.StatusCode)
	}
	p := c.post("/admin/account/password", url.Values{"current": {adminPassword}, "password": {"a long new password"},
		"confirm": {"another new password"}})
	if p.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p.Doc(t).Find(".flash.bad").Text(), "the two passwords differ") {
		t.Errorf("a confirmation that differs: %d %q, want 422 saying so", p.StatusCode, p.Doc(t).Find(".flash.bad").Text())
	}
	var failures int64
	c.db.Model(&models.LoginFailure{}).Count(&failures)
	if failures != 1 {
		t.Errorf("%d failures counted, want 1: the wrong current password, not the confirmation that differed", failures)
	}
	if p := c.post("/admin/account/password", url.Values{"current": {adminPassword}, "password": {"a long new password"},
		"confirm": {"a long new password"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("change: %d\n%s", p.StatusCode, p.Body)
	}
	if p := c.postWith(c.newClient(), "/admin/login", url.Values{"email": {adminEmail}, "password": {"a long new password"}}); p.StatusCode != http.StatusSeeOther {
		t.Errorf("log-in with the new password: %d", p.StatusCode)
	}
}
