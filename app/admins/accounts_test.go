package admins_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// clock is a time the test moves by hand.
type clock struct{ t atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.t.Store(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.t.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.t.Add(int64(d)) }
func mustEnsure(t *testing.T, s *admins.Service, email string, role models.AdminRole) int64 {
	t.Helper()
	ctx := context.Background()
	token, err := s.Invite(ctx, email, role, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Accept(ctx, token, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// One invitation link posted by eight browsers at once opens one account:
// the link is used up by the transaction that makes the admin.
func TestInvitationOpensOneAccountOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := admins.NewService(db, time.Now)
	ctx := context.Background()
	token, err := s.Invite(ctx, " New.Operator@Example.com ", models.RoleOperator, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := s.Invitation(ctx, token)
	if err != nil || inv.Email != "new.operator@example.com" || inv.Role != models.RoleOperator {
		t.Fatalf("Invitation = %+v, %v", inv, err)
	}
	const n = 8
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, err := s.Accept(ctx, token, "correct horse battery")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, admins.ErrNoInvitation):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != n-1 {
		t.Errorf("%d accepted, %d refused; want 1 and %d", ok.Load(), refused.Load(), n-1)
	}
	var users []models.AdminUser
	db.Find(&users, "email = ?", "new.operator@example.com")
	if len(users) != 1 || users[0].Role != models.RoleOperator {
		t.Fatalf("admins made: %+v", users)
	}
	if _, err := s.Authenticate(ctx, "new.operator@example.com", "correct horse battery"); err != nil {
		t.Errorf("the invited admin cannot log in: %v", err)
	}
	if _, err := s.Invite(ctx, "new.operator@example.com", models.RoleViewer, "owner@example.com"); models.ErrorCode(err) != models.EConflict {
		t.Errorf("inviting an admin again: %v, want a conflict", err)
	}
}

func TestInvitationExpiresAndChecksItsInput(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	c := newClock()
	s := admins.NewService(db, c.now)
	ctx := context.Background()
	token, err := s.Invite(ctx, "late@example.com", models.RoleViewer, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(ctx, token, "short"); models.ErrorCode(err) != models.EInvalid {
		t.Errorf("a short password: %v, want invalid", err)
	}
	c.add(admins.InvitationTTL + time.Second)
	if _, err := s.Accept(ctx, token, "correct horse battery"); !errors.Is(err, admins.ErrNoInvitation) {
		t.Errorf("an expired invitation: %v, want ErrNoInvitation", err)
	}
	if _, err := s.Accept(ctx, "made-up-token", "correct horse battery"); !errors.Is(err, admins.ErrNoInvitation) {
		t.Errorf("a made-up token: %v, want ErrNoInvitation", err)
	}
	for _, tc := range []struct {
		email string
		role  models.AdminRole
	}{{"not an email", models.RoleViewer}, {"a@example.com", "king"}, {"Name <a@example.com>", models.RoleViewer}} {
		if _, err := s.Invite(ctx, tc.email, tc.role, "owner@example.com"); models.ErrorCode(err) != models.EInvalid {
			t.Errorf("Invite(%q, %q) = %v, want invalid", tc.email, tc.role, err)
		}
	}
}

// Two owners demoting each other at the same moment leave one owner: the
// changes are one after the other, and the second sees it would leave
// none.
func TestLastOwnerStays(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := admins.NewService(db, time.Now)
	ctx := context.Background()
	a := mustEnsure(t, s, "a@example.com", models.RoleOwner)
	b := mustEnsure(t, s, "b@example.com", models.RoleOwner)
	start := make(chan struct{})
	var wg sync.WaitGroup
	var refused atomic.Int32
	for _, p := range []struct {
		by string
		id int64
	}{{"a@example.com", b}, {"b@example.com", a}} {
		wg.Go(func() {
			<-start
			_, err := s.Manage(ctx, p.by, p.id, admins.Change{Role: models.RoleViewer})
			if models.ErrorCode(err) == models.EInvalidTransition {
				refused.Add(1)
			} else if err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	var owners int64
	db.Model(&models.AdminUser{}).Where("role = 'owner' AND disabled_at IS NULL").Count(&owners)
	if owners != 1 || refused.Load() != 1 {
		t.Errorf("%d owners left, %d refused; want 1 and 1", owners, refused.Load())
	}
	if _, err := s.Manage(ctx, "a@example.com", a, admins.Change{Disable: true}); models.ErrorCode(err) != models.EInvalidTransition {
		t.Errorf("changing one's own account: %v, want refused", err)
	}
}

func TestDisabledAdminCannotLogIn(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := admins.NewService(db, time.Now)
	ctx := context.Background()
	mustEnsure(t, s, "owner@example.com", models.RoleOwner)
	id := mustEnsure(t, s, "op@example.com", models.RoleOperator)
	if _, err := s.Manage(ctx, "owner@example.com", id, admins.Change{Disable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "op@example.com", "correct horse battery"); !errors.Is(err, admins.ErrBadCredentials) {
		t.Errorf("a disabled admin logs in: %v", err)
	}
	if _, err := s.Manage(ctx, "owner@example.com", id, admins.Change{Enable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "op@example.com", "correct horse battery"); err != nil {
		t.Errorf("an enabled admin cannot log in: %v", err)
	}
}

func TestChangePassword(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := admins.NewService(db, time.Now)
	ctx := context.Background()
	mustEnsure(t, s, "op@example.com", models.RoleOperator)
	if _, err := s.ChangePassword(ctx, "op@example.com", "wrong password!", "a new long password"); models.ErrorCode(err) != models.EInvalid {
		t.Errorf("with a wrong current password: %v, want invalid", err)
	}
	if _, err := s.ChangePassword(ctx, "op@example.com", "correct horse battery", "a new long password"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "op@example.com", "correct horse battery"); !errors.Is(err, admins.ErrBadCredentials) {
		t.Errorf("the old password still works: %v", err)
	}
	if _, err := s.Authenticate(ctx, "op@example.com", "a new long password"); err != nil {
		t.Errorf("the new password does not: %v", err)
	}
}

// A code logs in once: sent by four log-ins at the same moment, one is
// accepted; an earlier step's code is refused after a later one was used.
func TestTOTPCodeIsAcceptedOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	c := newClock()
	s := admins.NewService(db, c.now)
	ctx := context.Background()
	mustEnsure(t, s, "owner@example.com", models.RoleOwner)
	key, err := admins.NewTOTPKey("Sekali", "owner@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := admins.NewTOTPKey("Sekali", "owner@example.com", key.Secret)
	if err != nil || again.Secret != key.Secret || again.URL != key.URL {
		t.Fatalf("the key shown again = %+v, %v; want %+v", again, err, key)
	}
	code := func(at time.Time) string {
		t.Helper()
		s, err := totp.GenerateCode(key.Secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := s.EnableTOTP(ctx, "owner@example.com", key.Secret, "000000x"); !errors.Is(err, admins.ErrBadCode) {
		t.Errorf("enabling with a bad code: %v", err)
	}
	if err := s.EnableTOTP(ctx, "owner@example.com", key.Secret, code(c.now())); err != nil {
		t.Fatal(err)
	}
	c.add(30 * time.Second)
	now := code(c.now())
	var ok atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			<-start
			if err := s.CheckTOTP(ctx, "owner@example.com", now); err == nil {
				ok.Add(1)
			} else if !errors.Is(err, admins.ErrBadCode) {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 {
		t.Errorf("one code was accepted %d times, want once", ok.Load())
	}
	c.add(30 * time.Second)
	if err := s.CheckTOTP(ctx, "owner@example.com", code(c.now().Add(-30*time.Second))); !errors.Is(err, admins.ErrBadCode) {
		t.Errorf("the used step's code again: %v", err)
	}
	if err := s.CheckTOTP(ctx, "owner@example.com", code(c.now().Add(-60*time.Second))); !errors.Is(err, admins.ErrBadCode) {
		t.Errorf("an older code: %v", err)
	}
	// One step late is accepted (a phone's clock drifts).
	c.add(30 * time.Second)
	if err := s.CheckTOTP(ctx, "owner@example.com", code(c.now().Add(-30*time.Second))); err != nil {
		t.Errorf("a code one step late: %v", err)
	}
	if err := s.RemoveTOTP(ctx, "owner@example.com", code(c.now().Add(30*time.Second))); err != nil {
		t.Fatal(err)
	}
	u, _ := s.Get(ctx, "owner@example.com")
	if u.TOTPSecret != nil {
		t.Error("the second factor is still set after RemoveTOTP")
	}
}

// A session lives unless the admin's sessions were ended after it logged
// in; one stamped with the very time they were ended (the session that
// changed the password) lives.
func TestSessionAlive(t *testing.T) {
	t.Parallel()
	ended := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	for _, c := range []struct {
		from     *time.Time
		loggedIn time.Time
		alive    bool
	}{
		{nil, time.Unix(0, 0), true},
		{&ended, ended.Add(-time.Microsecond), false},
		{&ended, time.UnixMicro(ended.UnixMicro()), true},
		{&ended, ended.Add(time.Second), true},
		{&ended, time.UnixMicro(0), false}, // a session of before log-in times were kept
	} {
		if got := admins.SessionAlive(&models.AdminUser{SessionsFrom: c.from}, c.loggedIn); got != c.alive {
			t.Errorf("sessions from %v, logged in %v: alive %v, want %v", c.from, c.loggedIn, got, c.alive)
		}
	}
}
