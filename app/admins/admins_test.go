package admins_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Guesses at one email from 40 addresses at once: each attempt is
// reserved before its password is checked, so exactly MaxFailures get
// through to bcrypt and every other one is told to wait — the count does
// not race the checks.
func TestReserveCountsConcurrentGuessesBeforeChecking(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := admins.NewService(db, time.Now)
	const guesses = 40
	var wg sync.WaitGroup
	start := make(chan struct{})
	allowed := make([]bool, guesses)
	for i := range guesses {
		wg.Go(func() {
			<-start
			_, wait, err := s.Reserve(context.Background(), "Admin@Example.com", fmt.Sprintf("10.0.0.%d", i))
			if err != nil {
				t.Error(err)
			}
			allowed[i] = wait == 0
		})
	}
	close(start)
	wg.Wait()
	n := 0
	for _, ok := range allowed {
		if ok {
			n++
		}
	}
	if n != admins.MaxFailures {
		t.Errorf("%d of %d concurrent guesses at one email got through, want %d", n, guesses, admins.MaxFailures)
	}
	var rows int64
	db.Model(&models.LoginFailure{}).Where("email = ?", "admin@example.com").Count(&rows)
	if rows != admins.MaxFailures {
		t.Errorf("%d failures counted, want %d", rows, admins.MaxFailures)
	}
}

// A success takes back its own attempt and the email's failures; the
// address keeps its others. An email of 3,000 characters is counted under
// its first 254 bytes: the count's index never refuses it.
func TestSucceededTakesBackItsAttempt(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := admins.NewService(db, time.Now)
	ctx := context.Background()
	for range 2 {
		if _, _, err := s.Reserve(ctx, "other@example.com", "10.1.1.1"); err != nil {
			t.Fatal(err)
		}
	}
	a, wait, err := s.Reserve(ctx, "admin@example.com", "10.1.1.1")
	if err != nil || wait != 0 {
		t.Fatalf("reserve: %v, wait %s", err, wait)
	}
	if err := s.Succeeded(ctx, a); err != nil {
		t.Fatal(err)
	}
	var byAddr int64
	db.Model(&models.LoginFailure{}).Where("remote_addr = ?", "10.1.1.1").Count(&byAddr)
	if byAddr != 2 {
		t.Errorf("the address has %d failures after a success, want its 2 others", byAddr)
	}
	long := strings.Repeat("a", 3000) + "@example.com"
	if _, _, err := s.Reserve(ctx, long, "10.1.1.2"); err != nil {
		t.Fatalf("a 3,000-character email: %v", err)
	}
}

// Refused log-ins of one address are one row per window, with a count:
// a stranger sending thousands grows the log by one row.
func TestRefusedLogInsAreOneRowPerAddressAndWindow(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) // one window, whenever the test runs
	s := admins.NewService(db, func() time.Time { return at })
	ctx := context.Background()
	long := strings.Repeat("x", 60000)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := s.RecordRefusedLogin(ctx, long, "10.2.2.2", fmt.Sprintf("wrong password %d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var rows []models.AdminAction
	db.Find(&rows, "remote_addr = ?", "10.2.2.2")
	if len(rows) != 1 || rows[0].Count != 50 || len(rows[0].Target) != admins.MaxEmailBytes || rows[0].WindowStart == nil {
		t.Fatalf("%d rows (%+v); want one row counting 50, its email cut to %d bytes", len(rows), rows, admins.MaxEmailBytes)
	}
}

// A batch of refused log-ins is charged to no admin: its target is the
// email tried while the client tried one, and "several emails" once it
// tried more — never whichever email came last.
func TestRefusedLogInsNameTheEmailsTriedNotAnAdmin(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := admins.NewService(db, func() time.Time { return at })
	ctx := context.Background()
	target := func(client string) models.AdminAction {
		var a models.AdminAction
		if err := db.Take(&a, "remote_addr = ?", client).Error; err != nil {
			t.Fatal(err)
		}
		return a
	}
	for range 3 {
		if err := s.RecordRefusedLogin(ctx, "Owner@Example.com", "10.3.3.3", "wrong email or password"); err != nil {
			t.Fatal(err)
		}
	}
	if a := target("10.3.3.3"); a.AdminEmail != "" || a.Target != "owner@example.com" || a.Count != 3 {
		t.Errorf("one email tried thrice: admin %q, target %q, count %d; want no admin, the email, 3", a.AdminEmail, a.Target, a.Count)
	}
	for _, email := range []string{"a@example.com", "b@example.com", "owner@example.com"} {
		if err := s.RecordRefusedLogin(ctx, email, "10.4.4.4", "wrong email or password"); err != nil {
			t.Fatal(err)
		}
	}
	if a := target("10.4.4.4"); a.AdminEmail != "" || a.Target != admins.SeveralEmails || a.Count != 3 {
		t.Errorf("three emails tried: admin %q, target %q, count %d; want no admin, %q, 3", a.AdminEmail, a.Target, a.Count, admins.SeveralEmails)
	}
	// The log filtered by the admin shows the refused log-ins that tried
	// only their email.
	rows, _, err := s.ListActions(ctx, admins.ActionFilter{Admin: "owner@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RemoteAddr != "10.3.3.3" {
		t.Errorf("the owner's actions: %+v, want the one row of refused log-ins that tried them", rows)
	}
}
