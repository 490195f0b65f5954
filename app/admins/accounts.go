package admins

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// InvitationTTL is how long an invitation link may be used.
const InvitationTTL = 72 * time.Hour

// A new password is at least MinPasswordBytes long (OWASP's minimum
// without a second factor is 15 characters; 12 with one, which the
// console offers to every admin) and at most MaxNewPasswordBytes: bcrypt
// reads no more than 72 bytes, and a longer password would be silently
// cut.
const (
	MinPasswordBytes    = 12
	MaxNewPasswordBytes = 72
)

// CheckPassword checks a password an admin chooses.
func CheckPassword(password string) error {
	if len(password) < MinPasswordBytes || len(password) > MaxNewPasswordBytes {
		return models.Errorf(models.EInvalid, "a password has %d to %d characters", MinPasswordBytes, MaxNewPasswordBytes)
	}
	return nil
}

// ParseRole reads a role's name.
func ParseRole(name string) (models.AdminRole, error) {
	for _, r := range models.AdminRoles {
		if string(r) == name {
			return r, nil
		}
	}
	return "", models.Errorf(models.EInvalid, "role must be viewer, operator or owner, not %q", name)
}

// Get returns the admin with email, or nil when there is none.
func (s *Service) Get(ctx context.Context, email string) (*models.AdminUser, error) {
	var u models.AdminUser
	err := s.db.WithContext(ctx).Take(&u, "email = ?", normalize(email)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admins.Get: %w", store.Classify(err))
	}
	return &u, nil
}

// List returns every admin, by email, and the invitations not yet used
// or expired, newest first. The admins are a few rows: no paging.
func (s *Service) List(ctx context.Context) ([]models.AdminUser, []models.AdminInvitation, error) {
	db := s.db.WithContext(ctx)
	var users []models.AdminUser
	if err := db.Order("email").Limit(1000).Find(&users).Error; err != nil {
		return nil, nil, fmt.Errorf("admins.List: %w", store.Classify(err))
	}
	var invites []models.AdminInvitation
	err := db.Where("used_at IS NULL AND expires_at > ?", s.now().UTC()).Order("id DESC").Limit(1000).Find(&invites).Error
	if err != nil {
		return nil, nil, fmt.Errorf("admins.List: %w", store.Classify(err))
	}
	return users, invites, nil
}

// Invite makes a one-time link for email to become an admin with role,
// valid for InvitationTTL, and returns its token: the caller shows it
// once (only its hash is kept). An email that already has an account is
// refused (409).
func (s *Service) Invite(ctx context.Context, email string, role models.AdminRole, by string) (string, error) {
	email = normalize(email)
	if len(email) > MaxEmailBytes {
		return "", ErrTooLong
	}
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
		return "", models.Errorf(models.EInvalid, "%q is not an email address", email)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	if u, err := s.Get(ctx, email); err != nil {
		return "", err
	} else if u != nil {
		return "", models.Errorf(models.EConflict, "%s is already an admin", email)
	}
	b := make([]byte, 32)
	rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	now := s.now().UTC()
	inv := models.AdminInvitation{Email: email, Role: role, TokenHash: tokenHash(token), InvitedBy: models.Truncate(by, MaxEmailBytes),
		CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
	if err := s.db.WithContext(ctx).Create(&inv).Error; err != nil {
		return "", fmt.Errorf("admins.Invite: %w", store.Classify(err))
	}
	return token, nil
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// RevokeInvitation ends the open invitation id now, so that its link
// opens nothing, and returns it. An invitation used or expired, or none,
// is ENotFound; revoking and accepting at once, one of them wins (both
// update the row only while it is open).
func (s *Service) RevokeInvitation(ctx context.Context, id int64) (*models.AdminInvitation, error) {
	now := s.now().UTC()
	var inv models.AdminInvitation
	res := s.db.WithContext(ctx).Model(&inv).Clauses(clause.Returning{}).
		Where("id = ? AND used_at IS NULL AND expires_at > ?", id, now).Update("expires_at", now)
	if res.Error != nil {
		return nil, fmt.Errorf("admins.RevokeInvitation: %w", store.Classify(res.Error))
	}
	if res.RowsAffected == 0 {
		return nil, models.Errorf(models.ENotFound, "no open invitation %d: it was used, it has expired or been revoked, or it never existed", id)
	}
	return &inv, nil
}

// AnyAdmin reports whether an admin exists: before the first, the log-in
// page says how it is made.
func (s *Service) AnyAdmin(ctx context.Context) (bool, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&models.AdminUser{}).Limit(1).Pluck("id", &ids).Error; err != nil {
		return false, fmt.Errorf("admins.AnyAdmin: %w", store.Classify(err))
	}
	return len(ids) > 0, nil
}

// ErrPasswordsDiffer is the answer to a form whose new password and its
// confirmation differ.
var ErrPasswordsDiffer = models.Errorf(models.EInvalid, "the two passwords differ: type the same new password twice")

// ConfirmPassword checks that a new password was typed the same twice.
func ConfirmPassword(password, again string) error {
	if subtle.ConstantTimeCompare([]byte(password), []byte(again)) != 1 {
		return ErrPasswordsDiffer
	}
	return nil
}

// ErrNoInvitation is the one answer to a token that was never issued,
// was used, or has expired.
var ErrNoInvitation = models.Errorf(models.ENotFound, "this invitation link is not valid: it was used, it has expired, or it never existed; ask an owner for a new one")

// Invitation returns the open invitation of token.
func (s *Service) Invitation(ctx context.Context, token string) (*models.AdminInvitation, error) {
	var inv models.AdminInvitation
	err := s.db.WithContext(ctx).Take(&inv, "token_hash = ? AND used_at IS NULL AND expires_at > ?", tokenHash(token), s.now().UTC()).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNoInvitation
	}
	if err != nil {
		return nil, fmt.Errorf("admins.Invitation: %w", store.Classify(err))
	}
	return &inv, nil
}

// Accept uses the invitation of token: it is marked used and its admin
// made with password, in one transaction, so that a link opens one
// account once, however often it is posted at the same moment.
func (s *Service) Accept(ctx context.Context, token, password string) (*models.AdminUser, error) {
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("admins.Accept: %w", err)
	}
	now := s.now().UTC()
	var u models.AdminUser
	err = store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var inv models.AdminInvitation
		res := tx.Model(&inv).Clauses(clause.Returning{}).
			Where("token_hash = ? AND used_at IS NULL AND expires_at > ?", tokenHash(token), now).
			Update("used_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNoInvitation
		}
		u = models.AdminUser{Email: inv.Email, PasswordHash: string(hash), Role: inv.Role, CreatedAt: now, PasswordChangedAt: &now}
		res = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&u)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return models.Errorf(models.EConflict, "%s is already an admin", inv.Email)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("admins.Accept: %w", store.Classify(err))
	}
	return &u, nil
}

// ErrWrongPassword is the answer to a password change whose current
// password is wrong: a guess at the password, which the caller counts.
var ErrWrongPassword = models.Errorf(models.EInvalid, "the current password is wrong")

// ChangePassword sets email's password to next when current is right,
// and ends every session of the admin that logged in before now, the
// time it returns: a password changed because it leaked also shuts out
// whoever logged in with it. The caller stamps the session it keeps with
// the returned time (SessionAlive).
func (s *Service) ChangePassword(ctx context.Context, email, current, next string) (time.Time, error) {
	if err := CheckPassword(next); err != nil {
		return time.Time{}, err
	}
	if _, err := s.Authenticate(ctx, email, current); err != nil {
		if errors.Is(err, ErrBadCredentials) {
			return time.Time{}, ErrWrongPassword
		}
		return time.Time{}, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(next), bcrypt.DefaultCost)
	if err != nil {
		return time.Time{}, fmt.Errorf("admins.ChangePassword: %w", err)
	}
	// In the database's precision, so that the session stamped with it
	// compares as its row does.
	now := s.now().UTC().Truncate(time.Microsecond)
	err = s.db.WithContext(ctx).Model(&models.AdminUser{}).Where("email = ?", normalize(email)).
		Updates(map[string]any{"password_hash": string(hash), "password_changed_at": now, "sessions_from": now}).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("admins.ChangePassword: %w", store.Classify(err))
	}
	return now, nil
}

// SessionAlive reports whether a session of u that logged in at loggedIn
// may still be used: not when u's sessions were ended after it (disabled,
// a password changed). A session without a log-in time is of before
// sessions were stamped, and lives until the first such end.
func SessionAlive(u *models.AdminUser, loggedIn time.Time) bool {
	return u.SessionsFrom == nil || !loggedIn.Before(*u.SessionsFrom)
}

// Change is what an owner does to another admin's account.
type Change struct {
	Role    models.AdminRole // set the role ("": keep it)
	Disable bool             // disable the account
	Enable  bool             // enable it again
	// ResetTOTP removes the admin's second factor (a lost phone): they
	// enrol again at their next log-in when owners must have one.
	ResetTOTP bool
}

// Manage applies c to admin id, on behalf of owner by. An owner cannot
// change their own account this way, and the last enabled owner cannot be
// disabled or demoted: the console always keeps someone who can manage
// it. Changes are one after the other (the admins' table lock), so two
// owners demoting each other at once cannot leave none.
func (s *Service) Manage(ctx context.Context, by string, id int64, c Change) (*models.AdminUser, error) {
	if c.Role != "" {
		if _, err := ParseRole(string(c.Role)); err != nil {
			return nil, err
		}
	}
	var u models.AdminUser
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtextextended('admin accounts', 0))").Error; err != nil {
			return err
		}
		if err := tx.Take(&u, "id = ?", id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return models.Errorf(models.ENotFound, "no admin %d", id)
			}
			return err
		}
		if u.Email == normalize(by) {
			return models.Errorf(models.EInvalidTransition, "you cannot change your own role or account here: ask another owner")
		}
		now := s.now().UTC()
		set := map[string]any{}
		switch {
		case c.Disable && u.DisabledAt == nil:
			// Its sessions end with it: enabling it again brings none back.
			set["disabled_at"] = now
			set["sessions_from"] = now
			u.DisabledAt = &now
		case c.Enable && u.DisabledAt != nil:
			set["disabled_at"] = nil
			u.DisabledAt = nil
		}
		if c.Role != "" && c.Role != u.Role {
			set["role"] = c.Role
			u.Role = c.Role
		}
		reset := c.ResetTOTP && u.TOTPSecret != nil
		if reset {
			set["totp_secret"] = nil
			u.TOTPSecret = nil
		}
		if len(set) == 0 {
			return nil
		}
		if err := tx.Model(&models.AdminUser{}).Where("id = ?", id).Updates(set).Error; err != nil {
			return err
		}
		var owners int64
		if err := tx.Model(&models.AdminUser{}).Where("role = ? AND disabled_at IS NULL", models.RoleOwner).Count(&owners).Error; err != nil {
			return err
		}
		if owners == 0 {
			return models.Errorf(models.EInvalidTransition, "%s is the last owner: make another admin owner first", u.Email)
		}
		if !reset {
			return nil
		}
		return s.notifyTx(tx, &u, now, "The second factor of your Sekali console account was reset",
			"The owner "+normalize(by)+" removed the second factor of your account "+u.Email+" on the Sekali console at "+
				now.Format(time.RFC1123)+".\nSet up a new one on Your account. If you did not ask for this, tell another owner.\n")
	})
	if err != nil {
		return nil, fmt.Errorf("admins.Manage: %w", store.Classify(err))
	}
	return &u, nil
}

// Emails are the emails of every admin, and of every open invitation,
// in lower case: the addresses a viewer's masked console leaves as they
// are.
func (s *Service) Emails(ctx context.Context) (map[string]bool, error) {
	var emails []string
	err := s.db.WithContext(ctx).Raw(`SELECT email FROM admin_users UNION SELECT email FROM admin_invitations WHERE used_at IS NULL LIMIT 2000`).
		Scan(&emails).Error
	if err != nil {
		return nil, fmt.Errorf("admins.Emails: %w", store.Classify(err))
	}
	keep := make(map[string]bool, len(emails))
	for _, e := range emails {
		keep[e] = true
	}
	return keep, nil
}
