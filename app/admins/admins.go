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
	db  *gorm.DB
	now func() time.Time
}

// NewService returns the admins service.
func NewService(db *gorm.DB, now func() time.Time) *Service { return &Service{db: db, now: now} }

// Authenticate returns the admin with this email and password, or
// ErrBadCredentials. It always runs one bcrypt comparison.
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
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u.ID == 0 {
		return nil, ErrBadCredentials
	}
	return &u, nil
}

// RetryAfter reports how long log-ins for email from remoteAddr must
// wait: zero when fewer than MaxFailures failed within FailureWindow for
// the email and for the address.
func (s *Service) RetryAfter(ctx context.Context, email, remoteAddr string) (time.Duration, error) {
	now := s.now().UTC()
	var wait time.Duration
	for _, by := range []struct{ column, value string }{{"email", normalize(email)}, {"remote_addr", remoteAddr}} {
		// The MaxFailures-th most recent failure in the window: once it
		// leaves the window, one more attempt is allowed.
		var at []time.Time
		err := s.db.WithContext(ctx).Model(&models.LoginFailure{}).
			Where(by.column+" = ? AND failed_at > ?", by.value, now.Add(-FailureWindow)).
			Order("failed_at DESC").Offset(MaxFailures-1).Limit(1).Pluck("failed_at", &at).Error
		if err != nil {
			return 0, fmt.Errorf("admins.RetryAfter: %w", store.Classify(err))
		}
		if len(at) == 1 {
			wait = max(wait, at[0].Add(FailureWindow).Sub(now))
		}
	}
	return wait, nil
}

// RecordFailure counts a failed log-in for email and remoteAddr.
func (s *Service) RecordFailure(ctx context.Context, email, remoteAddr string) error {
	err := s.db.WithContext(ctx).Create(&models.LoginFailure{
		Email: normalize(email), RemoteAddr: remoteAddr, FailedAt: s.now().UTC(),
	}).Error
	if err != nil {
		return fmt.Errorf("admins.RecordFailure: %w", store.Classify(err))
	}
	return nil
}

// ClearFailures forgets the failed log-ins of email after a successful
// one. The client address keeps its count: one address guessing at many
// accounts stays limited.
func (s *Service) ClearFailures(ctx context.Context, email string) error {
	err := s.db.WithContext(ctx).Where("email = ?", normalize(email)).Delete(&models.LoginFailure{}).Error
	if err != nil {
		return fmt.Errorf("admins.ClearFailures: %w", store.Classify(err))
	}
	return nil
}

// Record writes one entry of the action log. It uses its own short
// context: an action that happened is logged even if the request that
// asked for it has timed out.
func (s *Service) Record(ctx context.Context, a models.AdminAction) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now().UTC()
	}
	if len(a.Detail) > 2000 {
		a.Detail = a.Detail[:2000]
	}
	if err := s.db.WithContext(ctx).Create(&a).Error; err != nil {
		return fmt.Errorf("admins.Record: %w", store.Classify(err))
	}
	return nil
}

// ActionFilter selects entries of the action log.
type ActionFilter struct {
	Admin  string // exact email
	Action string // exact action name
	Before int64  // keyset cursor: entries with a smaller id
	Limit  int
}

// ListActions returns the newest entries matching f, and the cursor of
// the next page (0 on the last).
func (s *Service) ListActions(ctx context.Context, f ActionFilter) ([]models.AdminAction, int64, error) {
	q := s.db.WithContext(ctx).Model(&models.AdminAction{})
	if f.Admin != "" {
		q = q.Where("admin_email = ?", normalize(f.Admin))
	}
	if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	limit := max(1, min(f.Limit, 200))
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
