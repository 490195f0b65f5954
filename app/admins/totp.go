package admins

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"image/png"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

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
// admin's app has it.
func (s *Service) EnableTOTP(ctx context.Context, email, secret, code string) error {
	step := codeStep(secret, code, s.now())
	if step == 0 {
		return ErrBadCode
	}
	res := s.db.WithContext(ctx).Model(&models.AdminUser{}).Where("email = ? AND totp_secret IS NULL", normalize(email)).
		Updates(map[string]any{"totp_secret": secret, "totp_last_step": step})
	if res.Error != nil {
		return fmt.Errorf("admins.EnableTOTP: %w", store.Classify(res.Error))
	}
	if res.RowsAffected == 0 {
		return models.Errorf(models.EInvalidTransition, "a second factor is already set up: remove it first")
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

// RemoveTOTP removes email's second factor, with a code from it.
func (s *Service) RemoveTOTP(ctx context.Context, email, code string) error {
	if err := s.CheckTOTP(ctx, email, code); err != nil {
		return err
	}
	err := s.db.WithContext(ctx).Model(&models.AdminUser{}).Where("email = ?", normalize(email)).Update("totp_secret", nil).Error
	if err != nil {
		return fmt.Errorf("admins.RemoveTOTP: %w", store.Classify(err))
	}
	return nil
}
