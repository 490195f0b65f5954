// Package admins keeps the people who may log in to the admin console:
// their accounts (passwords stored as bcrypt hashes, never in clear), the
// checks at log-in — one answer and one cost for an unknown email and a
// wrong password, and a limit on failures counted in PostgreSQL so that
// it holds across every web process — and the log of what they did.
package admins

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Log-in limits (OWASP authentication cheat sheet): after MaxFailures
// failed log-ins for one email or from one client address within
// FailureWindow, further attempts are refused until the oldest of them
// leaves the window.
const (
	MaxFailures   = 5
	FailureWindow = 15 * time.Minute
)

// Ensure creates the admin email with password unless an admin with that
// email exists. When password is empty it makes one up; generated is that
// password, for the caller to show once. created reports whether a row was
// written.
func Ensure(ctx context.Context, db *gorm.DB, email, password string) (created bool, generated string, err error) {
	email = normalize(email)
	var n int64
	if err := db.WithContext(ctx).Model(&models.AdminUser{}).Where("email = ?", email).Count(&n).Error; err != nil {
		return false, "", err
	}
	if n > 0 {
		return false, "", nil
	}
	if password == "" {
		b := make([]byte, 12)
		rand.Read(b)
		password = base64.RawURLEncoding.EncodeToString(b)
		generated = password
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return false, "", fmt.Errorf("admins.Ensure: %w", err)
	}
	res := db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&models.AdminUser{Email: email, PasswordHash: string(hash)})
	if res.Error != nil {
		return false, "", fmt.Errorf("admins.Ensure: %w", res.Error)
	}
	if res.RowsAffected == 0 { // created by a concurrent seed
		return false, "", nil
	}
	return true, generated, nil
}

// normalize is how emails are compared: without surrounding space, in
// lower case.
func normalize(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// ErrBadCredentials is the one answer to an unknown email and to a wrong
// password, so that the answer does not tell which emails have accounts.
var ErrBadCredentials = models.Errorf(models.EUnauthorized, "wrong email or password")

// dummyHash is compared against when the email is unknown, so that an
// unknown email costs as much time as a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("sekali: no such admin"), bcrypt.DefaultCost)

// Service checks log-ins and keeps the action log.
type Service struct {
	db    *gorm.DB
	now   func() time.Time
	tasks Tasks // nil: no admin is emailed
}

// Tasks makes the outbox row of the task that emails an admin's notice
// (jobs.Tasks in the app; this package does not know the job system).
type Tasks interface {
	AdminNotice(key string, now time.Time) models.OutboxMessage
}

// Notifying makes s email an admin when their second factor is set up,
// removed or reset (notifyTx), through tasks; it returns s.
func (s *Service) Notifying(tasks Tasks) *Service {
	s.tasks = tasks
	return s
}

// NewService returns the admins service.
func NewService(db *gorm.DB, now func() time.Time) *Service { return &Service{db: db, now: now} }

// Authenticate returns the admin with this email and password, or
// ErrBadCredentials — for a disabled admin too. It always runs one
// bcrypt comparison.
func (s *Service) Authenticate(ctx context.Context, email, password string) (*models.AdminUser, error) {
	var u models.AdminUser
	err := s.db.WithContext(ctx).Take(&u, "email = ?", normalize(email)).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("admins.Authenticate: %w", store.Classify(err))
	}
	hash := []byte(u.PasswordHash)
	if u.ID == 0 {
		hash = dummyHash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u.ID == 0 || u.DisabledAt != nil {
		return nil, ErrBadCredentials
	}
	return &u, nil
}

// Bounds of what a log-in form may carry: the longest an email address
// can be (RFC 5321's path limit), and a password longer than any a person
// types (bcrypt reads 72 bytes of it anyway).
const (
	MaxEmailBytes    = 254
	MaxPasswordBytes = 1024
)

// ErrTooLong is the answer to a log-in whose email or password is longer
// than MaxEmailBytes or MaxPasswordBytes: refused before any hash is
// compared, and counted as a failure.
var ErrTooLong = models.Errorf(models.EInvalid, "an email address has at most %d characters, a password at most %d", MaxEmailBytes, MaxPasswordBytes)

// Attempt is a log-in attempt that Reserve let through: it counts as a
// failure from the moment it is reserved, so that guesses sent at once
// are counted before any of them is checked.
type Attempt struct {
	ID    int64
	Email string
}

// Reserve takes one attempt for email from client, or says how long to
// wait when MaxFailures failures (attempts in flight included) stand
// within FailureWindow for the email or for the client. client is the
// client's identity (an IPv4 address, or an IPv6 network: the web layer's
// ClientIdentity), kept in the failure's remote_addr, so that a sender
// cannot start afresh from each address of its /64. It counts in one
// transaction that holds the email's and the client's advisory locks, so
// N guesses sent at once let at most MaxFailures through to the password
// check: the allowed number of bcrypt runs. The reserved row is the
// failure; Succeeded takes it back. An email longer than MaxEmailBytes is
// counted under its first MaxEmailBytes bytes, so that no input can make
// the count's index refuse the row.
func (s *Service) Reserve(ctx context.Context, email, client string) (Attempt, time.Duration, error) {
	now := s.now().UTC()
	a := Attempt{Email: models.Truncate(normalize(email), MaxEmailBytes)}
	client = models.Truncate(client, MaxEmailBytes)
	var wait time.Duration
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		// Email first, then client, always: no two log-ins wait for each
		// other in opposite orders.
		for _, key := range []string{"admin login email:" + a.Email, "admin login addr:" + client} {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", key).Error; err != nil {
				return err
			}
		}
		wait = 0
		for _, by := range []struct{ column, value string }{{"email", a.Email}, {"remote_addr", client}} {
			// The MaxFailures-th most recent failure in the window: once it
			// leaves the window, one more attempt is allowed.
			var at []time.Time
			err := tx.Model(&models.LoginFailure{}).
				Where(by.column+" = ? AND failed_at > ?", by.value, now.Add(-FailureWindow)).
				Order("failed_at DESC").Offset(MaxFailures-1).Limit(1).Pluck("failed_at", &at).Error
			if err != nil {
				return err
			}
			if len(at) == 1 {
				wait = max(wait, at[0].Add(FailureWindow).Sub(now))
			}
		}
		if wait > 0 {
			return nil
		}
		f := models.LoginFailure{Email: a.Email, RemoteAddr: client, FailedAt: now}
		if err := tx.Create(&f).Error; err != nil {
			return err
		}
		a.ID = f.ID
		return nil
	})
	if err != nil {
		return Attempt{}, 0, fmt.Errorf("admins.Reserve: %w", store.Classify(err))
	}
	return a, wait, nil
}

// Succeeded takes back a reserved attempt that logged in, with the
// email's other failures. The client keeps its other failures: one
// client guessing at many accounts stays limited.
func (s *Service) Succeeded(ctx context.Context, a Attempt) error {
	err := s.db.WithContext(ctx).Where("email = ? OR id = ?", a.Email, a.ID).Delete(&models.LoginFailure{}).Error
	if err != nil {
		return fmt.Errorf("admins.Succeeded: %w", store.Classify(err))
	}
	return nil
}

// TakeBack takes back the one reserved attempt a, and not the email's
// other failures: a right password whose second factor is still to come.
func (s *Service) TakeBack(ctx context.Context, a Attempt) error {
	if err := s.db.WithContext(ctx).Delete(&models.LoginFailure{}, a.ID).Error; err != nil {
		return fmt.Errorf("admins.TakeBack: %w", store.Classify(err))
	}
	return nil
}

// Record writes one entry of the action log, its fields cut to their
// bounds (admin_actions_bounds). It uses its own short context: an action
// that happened is logged even if the request that asked for it has timed
// out.
func (s *Service) Record(ctx context.Context, a models.AdminAction) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now().UTC()
	}
	bound(&a)
	a.Count, a.WindowStart = 1, nil
	if err := s.db.WithContext(ctx).Create(&a).Error; err != nil {
		return fmt.Errorf("admins.Record: %w", store.Classify(err))
	}
	return nil
}

// RecordTx writes one entry of the action log in tx, the transaction of
// the action itself: the action and its entry commit together or not at
// all (a discarded job and who discarded it, why). CreatedAt is now when
// unset.
func RecordTx(tx *gorm.DB, a models.AdminAction) error {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = time.Now().UTC()
	}
	bound(&a)
	a.Count, a.WindowStart = 1, nil
	if err := tx.Create(&a).Error; err != nil {
		return fmt.Errorf("admins.RecordTx: %w", store.Classify(err))
	}
	return nil
}

// SeveralEmails is the target of a row of refused log-ins that tried
// more than one email.
const SeveralEmails = "several emails"

// RecordRefusedLogin counts a refused log-in (a wrong password, a
// throttled or over-long attempt) in the one row of its client and
// FailureWindow: a stranger cannot grow the log by more than a row per
// client and window, however much they send. client is as Reserve's
// (an IPv6 sender's /64), and is the row's remote_addr: the row counts
// every address of it; the access log has each request's own. A refused
// log-in is no admin's action, so the row names no admin: the email
// tried is its target — SeveralEmails once the client has tried more
// than one in the window, not whichever came last — and it keeps the
// last reason.
func (s *Service) RecordRefusedLogin(ctx context.Context, email, client, detail string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := s.now().UTC()
	window := now.Truncate(FailureWindow)
	a := models.AdminAction{Action: "login", Target: models.Truncate(normalize(email), MaxEmailBytes), Result: models.ActionRefused,
		Detail: detail, RemoteAddr: client, CreatedAt: now, Count: 1, WindowStart: &window}
	bound(&a)
	err := s.db.WithContext(ctx).Exec(`
INSERT INTO admin_actions (admin_email, action, target, result, detail, remote_addr, created_at, count, window_start)
VALUES ('', ?, ?, ?, ?, ?, ?, 1, ?)
ON CONFLICT (remote_addr, window_start) WHERE window_start IS NOT NULL
DO UPDATE SET count = admin_actions.count + 1, detail = excluded.detail,
    target = CASE WHEN admin_actions.target = excluded.target THEN admin_actions.target ELSE ? END,
    created_at = greatest(admin_actions.created_at, excluded.created_at)`,
		a.Action, a.Target, a.Result, a.Detail, a.RemoteAddr, a.CreatedAt, a.WindowStart, SeveralEmails).Error
	if err != nil {
		return fmt.Errorf("admins.RecordRefusedLogin: %w", store.Classify(err))
	}
	return nil
}

// bound cuts an entry's fields to the lengths admin_actions allows.
func bound(a *models.AdminAction) {
	a.AdminEmail = models.Truncate(a.AdminEmail, MaxEmailBytes)
	a.Action = models.Truncate(a.Action, 64)
	a.Target = models.Truncate(a.Target, 255)
	a.Detail = models.Truncate(a.Detail, 2000)
	a.RemoteAddr = models.Truncate(a.RemoteAddr, 255)
}

// ActionFilter selects entries of the action log.
type ActionFilter struct {
	// Admin is an exact email: that admin's actions, and the refused
	// log-ins that tried it (which name no admin).
	Admin  string
	Action string // exact action name
	Before int64  // keyset cursor: entries with a smaller id
	Limit  int
}

// ListActions returns the newest entries matching f, and the cursor of
// the next page (0 on the last).
func (s *Service) ListActions(ctx context.Context, f ActionFilter) ([]models.AdminAction, int64, error) {
	q := s.db.WithContext(ctx).Model(&models.AdminAction{})
	if f.Admin != "" {
		q = q.Where("admin_email = ? OR (window_start IS NOT NULL AND target = ?)", normalize(f.Admin), normalize(f.Admin))
	}
	if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	limit := store.PageSize(f.Limit)
	var rows []models.AdminAction
	if err := q.Order("id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, 0, fmt.Errorf("admins.ListActions: %w", store.Classify(err))
	}
	var next int64
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].ID
	}
	return rows, next, nil
}
