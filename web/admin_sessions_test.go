package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sekali/sekali/models"
)

// redirectedToLogIn reports whether p sends the browser to log in.
func redirectedToLogIn(p page) bool {
	return p.StatusCode == http.StatusSeeOther && strings.HasPrefix(p.Header.Get("Location"), "/admin/login")
}

// A disabled admin's sessions end at the disable, whether or not they are
// used before the admin is enabled again: enabling brings none back.
func TestDisablingEndsSessionsForGood(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	op := c.loginAs("op@example.com", models.RoleOperator)
	var u models.AdminUser
	c.db.Take(&u, "email = ?", "op@example.com")
	id := strconv.FormatInt(u.ID, 10)
	for _, change := range []string{"disable", "enable"} {
		if p := c.post("/admin/admins/"+id+"/"+change, nil); p.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", change, p.StatusCode, p.Body)
		}
	}
	if p := op.get("/admin"); !redirectedToLogIn(p) {
		t.Errorf("the session of before the disable, after the enable: %d %s, want a redirect to log in", p.StatusCode, p.Header.Get("Location"))
	}
	// The admin logs in again and works.
	fresh := c.freshLogIn("op@example.com")
	if p := fresh.get("/admin"); p.StatusCode != http.StatusOK {
		t.Errorf("a log-in after the enable: %d", p.StatusCode)
	}
}

// A password change ends the admin's other sessions; the session that
// changed it goes on.
func TestPasswordChangeEndsOtherSessions(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	other := c.freshLogIn(adminEmail)
	p := c.post("/admin/account/password", url.Values{"current": {adminPassword}, "password": {"a long new password"},
		"confirm": {"a long new password"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("change: %d\n%s", p.StatusCode, p.Body)
	}
	if p := other.get("/admin"); !redirectedToLogIn(p) {
		t.Errorf("the other session after the change: %d %s, want a redirect to log in", p.StatusCode, p.Header.Get("Location"))
	}
	if p := c.get("/admin"); p.StatusCode != http.StatusOK {
		t.Errorf("the session that changed it: %d, want 200", p.StatusCode)
	}
}

// freshLogIn is the console seen by the existing admin email (password
// adminPassword) from a new browser.
func (c *console) freshLogIn(email string) *console {
	c.t.Helper()
	other := *c
	other.client = c.newClient()
	if p := other.post("/admin/login", url.Values{"email": {email}, "password": {adminPassword}}); p.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("log-in of %s: %d\n%s", email, p.StatusCode, p.Body)
	}
	return &other
}
