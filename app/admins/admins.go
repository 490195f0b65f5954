// Package admins keeps the people who may log in to the admin pages.
// Passwords are stored as bcrypt hashes, never in clear.
package admins

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/models"
)

// Ensure creates the admin email with password unless an admin with that
// email exists. When password is empty it makes one up; generated is that
// password, for the caller to show once. created reports whether a row was
// written.
func Ensure(ctx context.Context, db *gorm.DB, email, password string) (created bool, generated string, err error) {
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
