package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// adminAdmins is GET /admin/admins (owners): every admin and the open
// invitations.
func (s *Server) adminAdmins(c echo.Context) error {
	v, err := s.adminsView(c)
	if err != nil {
		return err
	}
	return s.show(c, "Admins", "admins", v, views.AdminsPage(v))
}

func (s *Server) adminsView(c echo.Context) (views.Admins, error) {
	users, invites, err := s.deps.Admins.List(c.Request().Context())
	if err != nil {
		return views.Admins{}, err
	}
	v := views.Admins{Admins: []views.AdminRow{}, Invitations: []views.InvitationRow{}}
	for _, r := range models.AdminRoles {
		v.Roles = append(v.Roles, string(r))
	}
	for _, u := range users {
		v.Admins = append(v.Admins, views.AdminRow{ID: u.ID, Email: u.Email, Role: string(u.Role), MFA: u.TOTPSecret != nil,
			Disabled: u.DisabledAt != nil, Created: u.CreatedAt, Self: u.Email == adminOf(c)})
	}
	for _, i := range invites {
		v.Invitations = append(v.Invitations, views.InvitationRow{ID: i.ID, Email: i.Email, Role: string(i.Role), InvitedBy: i.InvitedBy, Expires: i.ExpiresAt})
	}
	return v, nil
}

// adminInvite is POST /admin/admins/invite (owners) with an email and a
// role: the page again, with the one-time link shown once (it is not kept
// anywhere a later page could show it again).
func (s *Server) adminInvite(c echo.Context) error {
	email := strings.TrimSpace(c.FormValue("email"))
	role, err := admins.ParseRole(c.FormValue("role"))
	if err != nil {
		return err
	}
	token, err := s.deps.Admins.Invite(c.Request().Context(), email, role, adminOf(c))
	if err != nil {
		s.record(c, adminOf(c), "invite admin", models.Truncate(email, admins.MaxEmailBytes), resultOf(err), err.Error())
		return err
	}
	s.record(c, adminOf(c), "invite admin", email, models.ActionOK, "as "+string(role))
	v, err := s.adminsView(c)
	if err != nil {
		return err
	}
	v.Link, v.LinkEmail = InvitationLink(s.baseURL(c), token), strings.ToLower(email)
	return s.page(c, http.StatusOK, "Admins", "admins", views.AdminsPage(v))
}

// InvitationLink is the address of an invitation's page.
func InvitationLink(base, token string) string { return base + "/admin/invite/" + token }

// baseURL is the console's address as the admin reaches it: PUBLIC_URL,
// else the request's own scheme and host.
func (s *Server) baseURL(c echo.Context) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	return c.Scheme() + "://" + c.Request().Host
}

// adminManage is POST /admin/admins/:id/{role,disable,enable,reset-mfa}
// (owners): one change to another admin's account, logged.
func (s *Server) adminManage(change string) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id < 1 {
			return models.Errorf(models.ENotFound, "no admin %q", c.Param("id"))
		}
		var ch admins.Change
		switch change {
		case "role":
			if ch.Role, err = admins.ParseRole(c.FormValue("role")); err != nil {
				return err
			}
		case "disable":
			ch.Disable = true
		case "enable":
			ch.Enable = true
		case "reset-mfa":
			ch.ResetTOTP = true
		}
		u, err := s.deps.Admins.Manage(c.Request().Context(), adminOf(c), id, ch)
		target := "admin " + strconv.FormatInt(id, 10)
		if u != nil {
			target = u.Email
		}
		action := map[string]string{"role": "set admin role", "disable": "disable admin", "enable": "enable admin",
			"reset-mfa": "remove second factor"}[change]
		if err != nil {
			s.record(c, adminOf(c), action, target, resultOf(err), err.Error())
			return err
		}
		detail := ""
		if change == "role" {
			detail = "to " + string(ch.Role)
		}
		s.record(c, adminOf(c), action, target, models.ActionOK, detail)
		s.flash(c, "ok", strings.ToUpper(action[:1])+action[1:]+": "+u.Email+" "+detail)
		return seeOther(c, "/admin/admins")
	}
}

// adminRevokeInvitation is POST /admin/admins/invitations/:id/revoke
// (owners): the invitation's link opens nothing any more; logged.
func (s *Server) adminRevokeInvitation(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return models.Errorf(models.ENotFound, "no invitation %q", c.Param("id"))
	}
	inv, err := s.deps.Admins.RevokeInvitation(c.Request().Context(), id)
	if err != nil {
		s.record(c, adminOf(c), "revoke invitation", "invitation "+strconv.FormatInt(id, 10), resultOf(err), err.Error())
		return err
	}
	s.record(c, adminOf(c), "revoke invitation", inv.Email, models.ActionOK, "as "+string(inv.Role)+", invited by "+inv.InvitedBy)
	s.flash(c, "ok", "Invitation revoked: the link for "+inv.Email+" opens nothing any more.")
	return seeOther(c, "/admin/admins")
}

// inviteForm is GET /admin/invite/:token: the invitation's page, for
// someone not logged in.
func (s *Server) inviteForm(c echo.Context) error {
	inv, err := s.deps.Admins.Invitation(c.Request().Context(), c.Param("token"))
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "Join", "", views.InvitePage(views.InviteForm{Token: c.Param("token"), Email: inv.Email, Role: string(inv.Role)}))
}

// acceptInvite is POST /admin/invite/:token with a password, typed twice:
// the account is made and the link used up, then the new admin logs in.
func (s *Server) acceptInvite(c echo.Context) error {
	ctx := c.Request().Context()
	token := c.Param("token")
	inv, err := s.deps.Admins.Invitation(ctx, token)
	if err != nil {
		return err
	}
	err = admins.ConfirmPassword(c.FormValue("password"), c.FormValue("confirm"))
	var u *models.AdminUser
	if err == nil {
		u, err = s.deps.Admins.Accept(ctx, token, c.FormValue("password"))
	}
	if models.ErrorCode(err) == models.EInvalid {
		f := views.InviteForm{Token: token, Email: inv.Email, Role: string(inv.Role), Error: models.ErrorMessage(err)}
		return s.page(c, http.StatusUnprocessableEntity, "Join", "", views.InvitePage(f))
	}
	if err != nil {
		return err
	}
	s.record(c, u.Email, "accept invitation", u.Email, models.ActionOK, "as "+string(u.Role)+", invited by "+inv.InvitedBy)
	s.flash(c, "ok", "Your account is made: log in with your email and the password you chose.")
	return seeOther(c, "/admin/login")
}
