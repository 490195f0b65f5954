package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// Session keys of the second factor: the email whose password was right
// and whose code is awaited (and since when), and a key being set up.
const (
	sessionPending    = "mfa_pending"
	sessionPendingAt  = "mfa_pending_at"
	sessionNewSecret  = "totp_new_secret"
	pendingCodeWithin = 5 * time.Minute
)

// account is GET /admin/account: the admin's own role, password and
// second factor. Without a second factor, a new key is made for the page
// (kept in the session until a code from it is typed).
func (s *Server) account(c echo.Context) error {
	v, err := s.accountView(c)
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "Your account", "", views.AccountPage(v))
}

func (s *Server) accountView(c echo.Context) (views.Account, error) {
	ctx := c.Request().Context()
	u, err := s.deps.Admins.Get(ctx, adminOf(c))
	if err != nil || u == nil {
		return views.Account{}, errors.Join(err, models.Errorf(models.ENotFound, "no admin %s", adminOf(c)))
	}
	v := views.Account{Email: u.Email, Role: string(u.Role), MFA: u.TOTPSecret != nil,
		MFARequired: s.cfg.AdminMFARequired && u.Role == models.RoleOwner}
	if !v.MFA {
		// The key being set up stays the same until a code from it is
		// typed: a mistyped code does not make the scanned key useless.
		key, err := admins.NewTOTPKey("Sekali", u.Email, s.deps.Sessions.GetString(ctx, sessionNewSecret))
		if err != nil {
			return v, err
		}
		s.deps.Sessions.Put(ctx, sessionNewSecret, key.Secret)
		v.NewSecret, v.NewQR = key.Secret, key.QR
	}
	return v, nil
}

// accountError shows the account page again with what was wrong: 422,
// or 429 when the throttle refused the try (trySecret).
func (s *Server) accountError(c echo.Context, err error) error {
	status := http.StatusUnprocessableEntity
	switch models.ErrorCode(err) {
	case models.EInvalid, models.EUnauthorized, models.EInvalidTransition:
	case models.ETooManyRequests:
		status = http.StatusTooManyRequests
	default:
		return err
	}
	v, verr := s.accountView(c)
	if verr != nil {
		return verr
	}
	v.Error = models.ErrorMessage(err)
	return s.page(c, status, "Your account", "", views.AccountPage(v))
}

// trySecret runs check, a guess at one of the logged-in admin's secrets
// (their current password, a second-factor code), as one attempt of the
// log-in throttle: reserved against the admin's email and the client
// before check runs (admins.Reserve), so a stolen session guesses no
// faster than a stranger at the log-in page, and the guesses of both
// count together. Over the limit check does not run: the answer is
// ETooManyRequests, with Retry-After. A guess that was right, or a try
// refused for something else (a new password too short), takes back
// its own attempt only: it buys no fresh guesses.
func (s *Server) trySecret(c echo.Context, check func() error) error {
	ctx := c.Request().Context()
	attempt, wait, err := s.deps.Admins.Reserve(ctx, adminOf(c), s.client(c))
	if err != nil {
		return err
	}
	if wait > 0 {
		wait = max(wait.Round(time.Second), time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		return models.Errorf(models.ETooManyRequests, "too many wrong passwords or codes: try again in %s", views.Duration(wait))
	}
	err = check()
	if errors.Is(err, admins.ErrBadCode) || errors.Is(err, admins.ErrWrongPassword) {
		return err
	}
	if terr := s.deps.Admins.TakeBack(ctx, attempt); terr != nil {
		return errors.Join(err, terr)
	}
	return err
}

// changePassword is POST /admin/account/password: the current password
// and a new one, typed twice (a mismatch is a 422, not a guess). Every other session of the admin ends (a password is
// changed because it may have leaked); this one gets a new token and
// goes on.
func (s *Server) changePassword(c echo.Context) error {
	ctx := c.Request().Context()
	if err := admins.ConfirmPassword(c.FormValue("password"), c.FormValue("confirm")); err != nil {
		s.record(c, adminOf(c), "change password", adminOf(c), resultOf(err), models.ErrorMessage(err))
		return s.accountError(c, err)
	}
	var from time.Time
	err := s.trySecret(c, func() (err error) {
		from, err = s.deps.Admins.ChangePassword(ctx, adminOf(c), c.FormValue("current"), c.FormValue("password"))
		return err
	})
	if err != nil {
		s.record(c, adminOf(c), "change password", adminOf(c), resultOf(err), models.ErrorMessage(err))
		return s.accountError(c, err)
	}
	if err := s.deps.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.deps.Sessions.Put(ctx, sessionLoginAt, from.UnixMicro())
	s.record(c, adminOf(c), "change password", adminOf(c), models.ActionOK, "other sessions ended")
	s.flash(c, "ok", "Your password is changed.")
	return seeOther(c, "/admin/account")
}

// enableMFA is POST /admin/account/mfa with a code from the key the
// account page showed.
func (s *Server) enableMFA(c echo.Context) error {
	ctx := c.Request().Context()
	secret := s.deps.Sessions.GetString(ctx, sessionNewSecret)
	if secret == "" {
		return s.accountError(c, models.Errorf(models.EInvalid, "the key to set up has expired: scan the new one"))
	}
	err := s.trySecret(c, func() error {
		return s.deps.Admins.EnableTOTP(ctx, adminOf(c), secret, strings.TrimSpace(c.FormValue("code")))
	})
	if err != nil {
		s.record(c, adminOf(c), "set up second factor", adminOf(c), resultOf(err), models.ErrorMessage(err))
		return s.accountError(c, err)
	}
	s.deps.Sessions.Remove(ctx, sessionNewSecret)
	s.record(c, adminOf(c), "set up second factor", adminOf(c), models.ActionOK, "TOTP")
	s.flash(c, "ok", "The second factor is set up: log-ins now ask for its code. You are emailed about it.")
	return seeOther(c, "/admin/account")
}

// removeMFA is POST /admin/account/mfa/remove with a fresh code (one
// of a later step than any accepted before); the admin is emailed.
func (s *Server) removeMFA(c echo.Context) error {
	err := s.trySecret(c, func() error {
		return s.deps.Admins.RemoveTOTP(c.Request().Context(), adminOf(c), strings.TrimSpace(c.FormValue("code")))
	})
	if err != nil {
		s.record(c, adminOf(c), "remove second factor", adminOf(c), resultOf(err), models.ErrorMessage(err))
		return s.accountError(c, err)
	}
	s.record(c, adminOf(c), "remove second factor", adminOf(c), models.ActionOK, "")
	s.flash(c, "warn", "The second factor is removed: log-ins ask for the password alone. You are emailed about it.")
	return seeOther(c, "/admin/account")
}

// codeForm is GET /admin/login/code: the second step of a log-in.
func (s *Server) codeForm(c echo.Context) error {
	if s.pendingAdmin(c) == "" {
		return c.Redirect(http.StatusSeeOther, "/admin/login")
	}
	return s.page(c, http.StatusOK, "Second factor", "", views.CodePage(views.CodeForm{Next: c.QueryParam("next")}))
}

// pendingAdmin is the email whose password was right within
// pendingCodeWithin and whose code is awaited, or "".
func (s *Server) pendingAdmin(c echo.Context) string {
	ctx := c.Request().Context()
	at := s.deps.Sessions.GetInt64(ctx, sessionPendingAt)
	if at == 0 || time.Since(time.Unix(at, 0)) > pendingCodeWithin {
		return ""
	}
	return s.deps.Sessions.GetString(ctx, sessionPending)
}

// loginCode is POST /admin/login/code: the code of the admin whose
// password was right. Each code is reserved against the email and the
// client like a password (admins.Reserve), so the throttle bounds the
// guesses at six digits as it bounds those at a password; a code is
// accepted once (admins.CheckTOTP).
func (s *Server) loginCode(c echo.Context) error {
	ctx := c.Request().Context()
	email := s.pendingAdmin(c)
	if email == "" {
		s.flash(c, "warn", "Log in again: the code was not typed within "+views.Duration(pendingCodeWithin)+".")
		return seeOther(c, "/admin/login")
	}
	form := views.CodeForm{Next: c.FormValue("next")}
	client := s.client(c)
	attempt, wait, err := s.deps.Admins.Reserve(ctx, email, client)
	if err != nil {
		return err
	}
	if wait > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second).Seconds())))
		s.recordRefused(c, email, client, "too many failed log-ins")
		form.Error = "Too many failed log-ins. Try again in " + views.Duration(wait.Round(time.Second)) + "."
		return s.page(c, http.StatusTooManyRequests, "Second factor", "", views.CodePage(form))
	}
	if err := s.deps.Admins.CheckTOTP(ctx, email, strings.TrimSpace(c.FormValue("code"))); err != nil {
		if !errors.Is(err, admins.ErrBadCode) {
			return err
		}
		s.recordRefused(c, email, client, "wrong second-factor code")
		form.Error = models.ErrorMessage(err)
		return s.page(c, http.StatusUnauthorized, "Second factor", "", views.CodePage(form))
	}
	return s.loggedIn(c, attempt, email, form.Next)
}

// loggedIn ends a log-in that passed every check: the attempt and the
// email's failures are taken back, the session gets a new token (no
// session fixation) and the admin goes where they were going.
func (s *Server) loggedIn(c echo.Context, attempt admins.Attempt, email, next string) error {
	ctx := c.Request().Context()
	if err := s.deps.Admins.Succeeded(ctx, attempt); err != nil {
		return err
	}
	if err := s.deps.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.deps.Sessions.Remove(ctx, sessionPending)
	s.deps.Sessions.Remove(ctx, sessionPendingAt)
	s.deps.Sessions.Put(ctx, sessionAdmin, email)
	s.deps.Sessions.Put(ctx, sessionLoginAt, time.Now().UnixMicro())
	s.record(c, email, "login", "", models.ActionOK, "")
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// recordRefused logs a refused log-in; a failure to log it is logged.
func (s *Server) recordRefused(c echo.Context, email, client, why string) {
	if err := s.deps.Admins.RecordRefusedLogin(c.Request().Context(), email, client, why); err != nil {
		s.log.ErrorContext(c.Request().Context(), "could not record a refused log-in", "request_id", requestID(c), "error", err)
	}
}
