package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// Session keys of the logged-in admin: their email, and when they logged
// in (Unix microseconds), which admins.SessionAlive weighs against the
// admin's sessions_from.
const (
	sessionAdmin   = "admin_email"
	sessionLoginAt = "admin_login_at"
)

// NewSessions returns the console's session manager on store (the
// PostgreSQL store in production, so that sessions outlive a restart and
// are shared by every web process). The cookie holds only a random token;
// it is HttpOnly, SameSite=Lax and, unless COOKIE_SECURE=false, Secure.
func NewSessions(store scs.Store, cfg config.Config) *scs.SessionManager {
	sm := scs.New()
	sm.Store = store
	sm.IdleTimeout = cfg.SessionIdle
	sm.Lifetime = cfg.SessionLifetime
	sm.Cookie.Name = "sekali_admin"
	sm.Cookie.Path = "/admin"
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Secure = cfg.CookieSecure
	sm.Cookie.Persist = false  // a session cookie: it ends with the browser, too
	sm.HashTokenInStore = true // a leaked sessions table does not hand out live tokens
	return sm
}

// loadSession loads the console session for the request and saves it
// with the response.
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	load := echo.WrapMiddleware(s.deps.Sessions.LoadAndSave)
	return load(func(c echo.Context) error {
		c.Set(ctxSession, true)
		return next(c)
	})
}

// requireAdmin lets only a logged-in admin through. Anyone else is sent
// to the log-in page (an htmx request is told to go there), which brings
// them back afterwards — unless they asked for JSON: a script gets a 401
// problem, not a page it cannot use. The admin's row is read on every
// request, so that a disabled admin or a changed role counts at once,
// not at the session's end; a session that logged in before the admin
// was disabled or changed their password is destroyed, even once the
// admin is enabled again. A viewer changes nothing (403 on every
// request but a read, their own account's and log-out: readOnly) and
// sees customers' emails masked (maskEmails). With ADMIN_MFA=required an
// owner without a second factor may only set one up.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		email := s.deps.Sessions.GetString(ctx, sessionAdmin)
		var u *models.AdminUser
		if email != "" {
			var err error
			if u, err = s.deps.Admins.Get(ctx, email); err != nil {
				return err
			}
			loggedIn := time.UnixMicro(s.deps.Sessions.GetInt64(ctx, sessionLoginAt))
			if u == nil || u.DisabledAt != nil || !admins.SessionAlive(u, loggedIn) {
				if err := s.deps.Sessions.Destroy(ctx); err != nil {
					return err
				}
				u = nil
			}
		}
		if u == nil {
			login := "/admin/login"
			if c.Request().Method == http.MethodGet {
				login += "?next=" + url.QueryEscape(c.Request().URL.RequestURI())
			}
			if isHTMX(c) {
				c.Response().Header().Set("HX-Redirect", login)
				return c.NoContent(http.StatusUnauthorized)
			}
			if preferredType(c.Request().Header.Get(echo.HeaderAccept)) == "json" {
				return models.Errorf(models.EUnauthorized, "log in to the console first (or use ADMIN_API_TOKEN on /api/admin)")
			}
			return c.Redirect(http.StatusSeeOther, login)
		}
		c.Set(ctxAdmin, u.Email)
		c.Set(ctxRole, u.Role)
		path := c.Request().URL.Path
		own := path == "/admin/logout" || path == "/admin/account" || strings.HasPrefix(path, "/admin/account/")
		if s.cfg.AdminMFARequired && u.Role == models.RoleOwner && u.TOTPSecret == nil && !own {
			if c.Request().Method == http.MethodGet && !wantsJSON(c) {
				s.flash(c, "warn", "Owners must use a second factor (ADMIN_MFA=required): set one up to go on.")
				return seeOther(c, "/admin/account")
			}
			return models.Errorf(models.EForbidden, "owners must use a second factor (ADMIN_MFA=required): set one up at /admin/account first")
		}
		if u.Role == models.RoleViewer {
			if m := c.Request().Method; m != http.MethodGet && m != http.MethodHead && !own {
				return models.Errorf(models.EForbidden, "a viewer may look, not act: this needs an operator or an owner")
			}
			return s.maskEmails(c, next)
		}
		return next(c)
	}
}

// need lets through only an admin whose role allows what role does; the
// others get 403. requireAdmin runs before it.
func need(role models.AdminRole) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !roleOf(c).Allows(role) {
				return models.Errorf(models.EForbidden, "this needs the %s role; yours is %s", role, roleOf(c))
			}
			return next(c)
		}
	}
}

// sameOrigin refuses state-changing requests that a browser sends from
// another origin — a form on another site (or another port) posting to
// the console — with Go's CrossOriginProtection (Sec-Fetch-Site, then
// Origin against Host). Together with the SameSite cookie this is the
// console's protection against cross-site request forgery; no token is
// needed in the forms.
func (s *Server) sameOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.crossOrigin.Check(c.Request()); err != nil {
			s.log.WarnContext(c.Request().Context(), "cross-origin request refused", "request_id", requestID(c),
				"path", c.Request().URL.Path, "origin", c.Request().Header.Get("Origin"),
				"sec_fetch_site", c.Request().Header.Get("Sec-Fetch-Site"), "remote_addr", c.RealIP())
			return models.Errorf(models.EForbidden, "cross-origin requests to the admin console are refused")
		}
		return next(c)
	}
}

// The console's Content-Security-Policy: only its own scripts, styles and
// images; no inline script or style; never in a frame. The queue UI
// (asynqmon) is a separate single-page app that needs inline scripts and
// styles, so it alone gets a looser policy; it too loads nothing from
// elsewhere (queuesPage).
const (
	consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
	queuesCSP = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
		"font-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; " +
		"base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)

// adminHeaders sets the security headers of every /admin answer.
func (s *Server) adminHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		csp := consoleCSP
		if strings.HasPrefix(c.Request().URL.Path, "/admin/queues") {
			csp = queuesCSP
		}
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// loginForm is GET /admin/login.
func (s *Server) loginForm(c echo.Context) error {
	if s.deps.Sessions.GetString(c.Request().Context(), sessionAdmin) != "" {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	exists, err := s.deps.Admins.AnyAdmin(c.Request().Context())
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "Log in", "", views.LoginPage(views.Login{Next: c.QueryParam("next"), NoAdmin: !exists}))
}

// login is POST /admin/login: email and password against admin_users.
// An unknown email and a wrong password get the same answer and cost the
// same time. Each attempt is reserved — counted as a failure — before the
// password is checked (admins.Reserve), so that guesses sent at once are
// counted before any of them runs bcrypt: after admins.MaxFailures for
// the email or from the client address within admins.FailureWindow, the
// answer is 429 until the oldest of them has aged out. An email or a
// password longer than any real one is refused, and counted, without a
// hash compared. Refused log-ins are logged one row per address and
// window. An admin with a second factor is asked for its code next
// (loginCode); otherwise the admin is logged in (loggedIn).
func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	// Text the database cannot store (NUL, invalid UTF-8) is dropped: such
	// an email names no admin, and is counted like any wrong one.
	email := strings.ToValidUTF8(strings.ReplaceAll(strings.TrimSpace(c.FormValue("email")), "\x00", ""), "")
	password := c.FormValue("password")
	tooLong := len(email) > admins.MaxEmailBytes || len(password) > admins.MaxPasswordBytes
	form := views.Login{Email: models.Truncate(email, admins.MaxEmailBytes), Next: c.FormValue("next")}
	// The throttle and the refused log-ins' rows count the client (an
	// IPv6 /64 is one); the access log keeps each request's address.
	client := s.client(c)
	refuse := func(status int, why, message string) error {
		s.recordRefused(c, form.Email, client, why)
		form.Error = message
		return s.page(c, status, "Log in", "", views.LoginPage(form))
	}
	attempt, wait, err := s.deps.Admins.Reserve(ctx, email, client)
	if err != nil {
		return err
	}
	if wait > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second).Seconds())))
		return refuse(http.StatusTooManyRequests, "too many failed log-ins",
			"Too many failed log-ins. Try again in "+views.Duration(wait.Round(time.Second))+".")
	}
	if tooLong {
		return refuse(http.StatusUnprocessableEntity, "email or password too long", fmt.Sprintf(
			"An email address has at most %d characters, and a password at most %d.", admins.MaxEmailBytes, admins.MaxPasswordBytes))
	}
	u, err := s.deps.Admins.Authenticate(ctx, email, password)
	if errors.Is(err, admins.ErrBadCredentials) {
		return refuse(http.StatusUnauthorized, "wrong email or password", "Wrong email or password.")
	}
	if err != nil {
		return err
	}
	if u.TOTPSecret == nil {
		return s.loggedIn(c, attempt, u.Email, form.Next)
	}
	// The password is right; the code is the second step. Only this
	// attempt is taken back: the email's failures stay counted, so that
	// the password does not buy fresh guesses at the code.
	if err := s.deps.Admins.TakeBack(ctx, attempt); err != nil {
		return err
	}
	if err := s.deps.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.deps.Sessions.Put(ctx, sessionPending, u.Email)
	s.deps.Sessions.Put(ctx, sessionPendingAt, time.Now().Unix())
	return c.Redirect(http.StatusSeeOther, "/admin/login/code?next="+url.QueryEscape(form.Next))
}

// logout is POST /admin/logout: the session is destroyed in the store, so
// its cookie opens nothing any more, even if it was copied.
func (s *Server) logout(c echo.Context) error {
	ctx := c.Request().Context()
	s.record(c, adminOf(c), "logout", "", models.ActionOK, "")
	if err := s.deps.Sessions.Destroy(ctx); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/login")
}

// safeNext keeps a post-log-in redirect inside the console: a path under
// /admin, never another host.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, "/admin") ||
		strings.HasPrefix(next, "//") || strings.Contains(next, `\`) || strings.HasPrefix(u.Path, "/admin/login") {
		return "/admin"
	}
	return u.RequestURI()
}

// record writes an entry of the admin action log. A failure to write it
// is logged, not returned: the action itself has happened.
func (s *Server) record(c echo.Context, admin, action, target, result, detail string) {
	err := s.deps.Admins.Record(c.Request().Context(), models.AdminAction{
		AdminEmail: admin, Action: action, Target: target, Result: result, Detail: detail, RemoteAddr: c.RealIP(),
	})
	if err != nil {
		s.log.ErrorContext(c.Request().Context(), "could not record an admin action", "request_id", requestID(c),
			"action", action, "target", target, "error", err)
	}
}
