package admins

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// The second factor is TOTP (RFC 6238) as every authenticator app reads
// it: SHA-1, six digits, a 30-second step. A code is accepted one step
// early or late (a phone's clock drifts), and once: the step it was
// accepted for is kept, and a code of that step or an earlier one is
// refused.
const (
	totpPeriod = 30
	totpSkew   = 1
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// ErrBadCode is the answer to a wrong, expired or already used code.
var ErrBadCode = models.Errorf(models.EUnauthorized, "wrong code: type the six digits your authenticator app shows now")

// TOTPKey is a new second factor for an admin to add to their app.
type TOTPKey struct {
	Secret string // base32, to type in by hand
	URL    string // the otpauth:// URL the QR code holds
	QR     string // the QR code, a data: URL of a PNG
}

// NewTOTPKey makes a new secret for email, under issuer's name; or, with
// secret (base32) given, the key of that secret: the one being set up,
// shown again.
func NewTOTPKey(issuer, email, secret string) (TOTPKey, error) {
	opts := totp.GenerateOpts{Issuer: issuer, AccountName: email, Period: totpPeriod}
	if secret != "" {
		raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
		if err != nil {
			return TOTPKey{}, fmt.Errorf("admins.NewTOTPKey: %w", err)
		}
		opts.Secret = raw
	}
	key, err := totp.Generate(opts)
	if err != nil {
		return TOTPKey{}, fmt.Errorf("admins.NewTOTPKey: %w", err)
	}
	img, err := key.Image(200, 200)
	if err != nil {
		return TOTPKey{}, fmt.Errorf("admins.NewTOTPKey: %w", err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return TOTPKey{}, fmt.Errorf("admins.NewTOTPKey: %w", err)
	}
	return TOTPKey{Secret: key.Secret(), URL: key.URL(),
		QR: "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}

// codeStep is the time step whose code secret makes code at now, within
// the skew, or 0 when none does.
func codeStep(secret, code string, now time.Time) int64 {
	if len(code) != 6 {
		return 0
	}
	for skew := -totpSkew; skew <= totpSkew; skew++ {
		at := now.Add(time.Duration(skew*totpPeriod) * time.Second)
		want, err := totp.GenerateCodeCustom(secret, at, totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return at.Unix() / totpPeriod
		}
	}
	return 0
}

// EnableTOTP makes secret email's second factor once code shows that the
// admin's app has it, and tells the admin by email, in one transaction.
func (s *Service) EnableTOTP(ctx context.Context, email, secret, code string) error {
	now := s.now()
	step := codeStep(secret, code, now)
	if step == 0 {
		return ErrBadCode
	}
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var u models.AdminUser
		res := tx.Model(&u).Clauses(clause.Returning{}).Where("email = ? AND totp_secret IS NULL", normalize(email)).
			Updates(map[string]any{"totp_secret": secret, "totp_last_step": step})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return models.Errorf(models.EInvalidTransition, "a second factor is already set up: remove it first")
		}
		return s.notifyTx(tx, &u, now, "A second factor was set up on your Sekali console account",
			"An authenticator app was set up as the second factor of your account "+u.Email+" on the Sekali console, at "+
				now.UTC().Format(time.RFC1123)+".\nIf you did not do this, someone is using your session: ask an owner to disable "+
				"the account now and to reset its second factor.\n")
	})
	if err != nil {
		return fmt.Errorf("admins.EnableTOTP: %w", store.Classify(err))
	}
	return nil
}

// CheckTOTP accepts code as email's second factor, once: the same code
// again, or any earlier one, is refused (ErrBadCode), even when two
// log-ins send it at the same moment (the update says from which step).
func (s *Service) CheckTOTP(ctx context.Context, email, code string) error {
	u, err := s.Get(ctx, email)
	if err != nil {
		return err
	}
	if u == nil || u.TOTPSecret == nil || u.DisabledAt != nil {
		return ErrBadCode
	}
	step := codeStep(*u.TOTPSecret, code, s.now())
	if step == 0 {
		return ErrBadCode
	}
	res := s.db.WithContext(ctx).Model(&models.AdminUser{}).
		Where("id = ? AND totp_secret = ? AND totp_last_step < ?", u.ID, *u.TOTPSecret, step).
		Update("totp_last_step", step)
	if res.Error != nil {
		return fmt.Errorf("admins.CheckTOTP: %w", store.Classify(res.Error))
	}
	if res.RowsAffected == 0 {
		return ErrBadCode
	}
	return nil
}

// RemoveTOTP removes email's second factor with a fresh code from it —
// one of a later step than any code it accepted before, so neither the
// code typed at log-in nor one seen over a shoulder removes it — and
// tells the admin by email: the check, the removal and the email commit
// in one transaction, under the admin's row lock.
func (s *Service) RemoveTOTP(ctx context.Context, email, code string) error {
	now := s.now()
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var u models.AdminUser
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&u, "email = ?", normalize(email)).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return ErrBadCode
		}
		if err != nil {
			return err
		}
		if u.TOTPSecret == nil || u.DisabledAt != nil {
			return ErrBadCode
		}
		step := codeStep(*u.TOTPSecret, code, now)
		if step == 0 || step <= u.TOTPLastStep {
			return ErrBadCode
		}
		// The step stays: a code of it cannot serve again, whatever comes next.
		err = tx.Model(&models.AdminUser{}).Where("id = ?", u.ID).
			Updates(map[string]any{"totp_secret": nil, "totp_last_step": step}).Error
		if err != nil {
			return err
		}
		return s.notifyTx(tx, &u, now, "The second factor of your Sekali console account was removed",
			"The second factor of your account "+u.Email+" on the Sekali console was removed at "+now.UTC().Format(time.RFC1123)+
				": log-ins now ask for the password alone.\nIf you did not do this, someone is using your session: ask an owner "+
				"to disable the account now.\n")
	})
	if err != nil {
		return fmt.Errorf("admins.RemoveTOTP: %w", store.Classify(err))
	}
	return nil
}

// notifyTx writes in tx the email that tells admin u of a change to
// their account made at now, and the task that sends it (mail.AdminNotice):
// nothing without Notifying.
func (s *Service) notifyTx(tx *gorm.DB, u *models.AdminUser, now time.Time, subject, body string) error {
	if s.tasks == nil {
		return nil
	}
	key := mail.AdminNoticeKey(u.ID, now)
	if err := mail.AdminNoticeTx(tx, key, u.Email, subject, body); err != nil {
		return err
	}
	return outbox.Add(tx, s.tasks.AdminNotice(key, now))
}
