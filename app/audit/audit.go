// Package audit checks the integrity invariants of SPEC §7 against the
// database. Each invariant is one SQL query that returns one line per
// violation, so a report says exactly what is wrong. `sekali verify`, the
// admin API and the tests all run these same checks.
package audit

import (
	"context"
	"fmt"
	"io"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/store"
)

// maxLines bounds the violations reported per check.
const maxLines = 100

// Check is one invariant: Query returns a text column, one row per
// violation.
type Check struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Query       string `json:"-"`
}

// Violation is one broken invariant.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// Report is the result of a run.
type Report struct {
	OK         bool        `json:"ok"`
	Violations []Violation `json:"violations"`
	Checked    []string    `json:"checked"`
	Drained    bool        `json:"drained"`
	Took       string      `json:"took"`
}

// Auditor runs checks against a database.
type Auditor struct {
	db     *gorm.DB
	checks []Check
	drain  bool
}

// New returns an auditor of every invariant: Checks and JobChecks. Its
// Run drains first.
func New(db *gorm.DB) *Auditor {
	return &Auditor{db: db, checks: append(append([]Check{}, Checks...), JobChecks...), drain: true}
}

// WithoutJobs returns an auditor of the invariants that hold without the
// jobs (1, 2, 3 and 6), which does not drain: for tests and set-ups that
// run no worker.
func WithoutJobs(db *gorm.DB) *Auditor { return &Auditor{db: db, checks: Checks} }

// DefaultDrainTimeout bounds the wait for the queues to drain.
const DefaultDrainTimeout = 30 * time.Second

// Run waits for the work in flight to finish (up to drainTimeout; a drain
// that times out is itself a violation), then runs every check in one
// read-only REPEATABLE READ transaction, so all checks see the same
// snapshot even while callbacks keep arriving.
func (a *Auditor) Run(ctx context.Context, drainTimeout time.Duration) (Report, error) {
	start := time.Now()
	r := Report{Violations: []Violation{}, Checked: []string{}}
	if a.drain {
		left, err := a.waitDrained(ctx, drainTimeout)
		if err != nil {
			return Report{}, fmt.Errorf("audit: drain: %w", store.Classify(err))
		}
		r.Drained = left == ""
		if left != "" {
			r.Violations = append(r.Violations, Violation{Check: "drain",
				Detail: fmt.Sprintf("work still in flight after %s: %s", drainTimeout, left)})
		}
		r.Checked = append(r.Checked, "drain")
	}
	err := a.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").Error; err != nil {
			return err
		}
		for _, c := range a.checks {
			var lines []string
			q := fmt.Sprintf("SELECT line FROM (%s) AS violations(line) LIMIT %d", c.Query, maxLines)
			if err := tx.Raw(q).Scan(&lines).Error; err != nil {
				return fmt.Errorf("check %s: %w", c.Name, err)
			}
			for _, l := range lines {
				r.Violations = append(r.Violations, Violation{Check: c.Name, Detail: l})
			}
			r.Checked = append(r.Checked, c.Name)
		}
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("audit: %w", store.Classify(err))
	}
	r.OK = len(r.Violations) == 0
	r.Took = time.Since(start).Round(time.Millisecond).String()
	return r, nil
}

// drainQuery counts the work still in flight: due outbox rows not yet
// handed to the queue, and paid orders whose jobs have not done their work
// (no invoice, or the order_paid email not sent). It looks at the effects,
// not at job rows: those of finished jobs are pruned after PRUNE_AFTER.
const drainQuery = `
SELECT (SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND process_at <= now()) AS outbox,
       (SELECT count(*) FROM orders o
        WHERE o.status = 'paid'
          AND (NOT EXISTS (SELECT 1 FROM invoices i WHERE i.order_id = o.id)
            OR NOT EXISTS (SELECT 1 FROM outbound_emails e
                           WHERE e.key = 'order_paid:' || o.id AND e.status = 'sent'))) AS orders`

// waitDrained polls until nothing is in flight or timeout passes; it
// returns what is left, or "" when drained.
func (a *Auditor) waitDrained(ctx context.Context, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		var left struct{ Outbox, Orders int64 }
		if err := a.db.WithContext(ctx).Raw(drainQuery).Scan(&left).Error; err != nil {
			return "", err
		}
		if left.Outbox == 0 && left.Orders == 0 {
			return "", nil
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("%d due outbox rows not relayed, %d paid orders without their invoice or sent email",
				left.Outbox, left.Orders), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Print writes a report for people.
func (a *Auditor) Print(w io.Writer, r Report) {
	byCheck := map[string][]string{}
	for _, v := range r.Violations {
		byCheck[v.Check] = append(byCheck[v.Check], v.Detail)
	}
	if lines := byCheck["drain"]; len(lines) > 0 {
		fmt.Fprintf(w, "FAIL  drain: %s\n", lines[0])
	}
	for _, c := range a.checks {
		lines := byCheck[c.Name]
		mark := "ok  "
		if len(lines) > 0 {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %d. %-14s %s\n", mark, c.ID, c.Name, c.Description)
		for _, l := range lines {
			fmt.Fprintf(w, "        - %s\n", l)
		}
	}
	if r.OK {
		fmt.Fprintf(w, "integrity audit: green (%d checks, %s)\n", len(r.Checked), r.Took)
	} else {
		fmt.Fprintf(w, "integrity audit: RED, %d violation(s) (%d checks, %s)\n", len(r.Violations), len(r.Checked), r.Took)
	}
}
