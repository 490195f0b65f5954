package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sekali/sekali/models"
)

// An owner revokes an open invitation from the Admins page: its link
// opens nothing any more, the revocation is logged, and revoking it again
// is a 404. An operator cannot revoke one.
func TestOwnerRevokesAnInvitation(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	p := c.post("/admin/admins/invite", url.Values{"email": {"later@example.com"}, "role": {"viewer"}})
	link := inviteLink.FindString(p.Body)
	if p.StatusCode != http.StatusOK || link == "" {
		t.Fatalf("invite: %d, link %q", p.StatusCode, link)
	}
	var inv models.AdminInvitation
	c.db.Take(&inv, "email = ?", "later@example.com")
	revoke := "/admin/admins/invitations/" + strconv.FormatInt(inv.ID, 10) + "/revoke"
	if n := c.get("/admin/admins").Doc(t).Find(`form[action="` + revoke + `"] button`).Length(); n != 1 {
		t.Errorf("the Admins page has %d Revoke buttons for the invitation, want 1", n)
	}
	operator := c.addAdmin("op@example.com", models.RoleOperator)
	if p := c.postWith(operator, revoke, nil); p.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's revoke: %d, want 403", p.StatusCode)
	}
	if p := c.post(revoke, nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d\n%s", p.StatusCode, p.Body)
	}
	if p := c.do(c.newClient(), "GET", link, nil, nil); p.StatusCode != http.StatusNotFound {
		t.Errorf("the revoked link: %d, want 404", p.StatusCode)
	}
	if p := c.postWith(c.newClient(), link, url.Values{"password": {"a long new password"}, "confirm": {"a long new password"}}); p.StatusCode != http.StatusNotFound {
		t.Errorf("accepting the revoked link: %d, want 404", p.StatusCode)
	}
	if c.get("/admin/admins").Doc(t).Find(`td:contains("later@example.com")`).Length() != 0 {
		t.Error("the Admins page still lists the revoked invitation")
	}
	if p := c.post(revoke, nil); p.StatusCode != http.StatusNotFound {
		t.Errorf("revoking it again: %d, want 404", p.StatusCode)
	}
	var logged int64
	c.db.Model(&models.AdminAction{}).Where("admin_email = ? AND action = 'revoke invitation' AND target = ? AND result = 'ok'",
		adminEmail, "later@example.com").Count(&logged)
	if logged != 1 {
		t.Errorf("%d revocations logged, want 1", logged)
	}
}

// The log-in page says how the first admin is made only while there is
// none: an invited admin never reads about sekali seed.
func TestLogInPageSpeaksOfSeedOnlyWithoutAnAdmin(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	if p := c.get("/admin/login"); strings.Contains(p.Body, "sekali seed") {
		t.Error("with an admin, the log-in page talks about sekali seed")
	}
	if err := c.db.Exec("DELETE FROM admin_users").Error; err != nil {
		t.Fatal(err)
	}
	if p := c.get("/admin/login"); !strings.Contains(p.Body, "sekali seed") {
		t.Error("without an admin, the log-in page does not say how the first is made")
	}
}
