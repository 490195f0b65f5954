// Package audit checks Sekali's integrity invariants against the
// database (docs/README.md#the-integrity-audit). Each invariant is one SQL
// query that returns one line per violation, so a report says exactly
// what is wrong. `sekali verify`, the admin API and the tests all run
// these same checks.
package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
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

// Violation is one broken invariant. Ref names the row at fault:
// order:ID, callback:ID, product:SKU, job:KEY or invoices:YEAR.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
	Ref    string `json:"ref,omitempty"`
}

// Report is the result of a run.
type Report struct {
	OK         bool        `json:"ok"`
	Violations []Violation `json:"violations"`
	// Checked names the invariants that ran, in the order of their IDs.
	// The drain is not one of them: it is a wait, reported by Drained
	// and, when it times out, by a "drain" violation.
	Checked []string `json:"checked"`
	Drained bool     `json:"drained"`
	// Settling counts the paid orders a live run (no drain) left out of
	// the job checks: paid within SettleWindow, their work still running.
	Settling int `json:"settling"`
	// Discarded are the jobs operators discarded (the newest 100), for
	// information: the job checks accept a paid order whose invoice or
	// email job was discarded, and this says which and why.
	Discarded []Violation `json:"discarded"`
	// Conflicts are the calls gateways answered with another amount or
	// currency than asked (the newest 100), for information: nothing of
	// them was applied, and each waits for an operator to settle it.
	Conflicts []Violation `json:"conflicts"`
	Took      string      `json:"took"`
	took      time.Duration
}

// Auditor runs checks against a database.
type Auditor struct {
	db     *gorm.DB
	checks []Check
	drain  bool
	alerts alerts.Tasks // nil: a red run raises no alert
	// ends are how long, in seconds, an outcome may stay unknown at each
	// gateway (gatewaycalls.Schedule.End), as JSON; others get
	// DefaultSchedule's.
	ends string
}

// New returns an auditor of every invariant: baseChecks and jobChecks. Its
// Run drains first.
func New(db *gorm.DB) *Auditor {
	return &Auditor{db: db, checks: append(append([]Check{}, baseChecks...), jobChecks...), drain: true}
}

// WithoutJobs returns an auditor of the invariants that hold without the
// jobs (baseChecks: 1 to 5), which does not drain: for tests and set-ups that
// run no worker.
func WithoutJobs(db *gorm.DB) *Auditor { return &Auditor{db: db, checks: baseChecks} }

// WithSchedules returns an auditor that judges an unknown outcome at
// each gateway by that gateway's schedule (check 10); one not in s, and
// every gateway without it, by gatewaycalls.DefaultSchedule.
func (a *Auditor) WithSchedules(s gatewaycalls.Schedules) *Auditor {
	ends := map[string]float64{}
	for provider, schedule := range s {
		ends[provider] = schedule.End().Seconds()
	}
	b := *a
	j, _ := json.Marshal(ends)
	b.ends = string(j)
	return &b
}

// RaisingAlerts makes a run that turns the audit red raise audit.red
// (docs/operations.md#operational-webhooks), with tasks making its send
// task.
func (a *Auditor) RaisingAlerts(tasks alerts.Tasks) *Auditor {
	b := *a
	b.alerts = tasks
	return &b
}

// Checks returns the invariants this auditor checks, in the order they
// run and are printed, which is the order of their IDs.
func (a *Auditor) Checks() []Check { return a.checks }

// DefaultDrainTimeout bounds the wait for the queues to drain.
const DefaultDrainTimeout = 30 * time.Second

// SettleWindow is how long a live run gives a paid order's jobs before it
// judges the order's invoice and email.
const SettleWindow = time.Minute

// Run checks every invariant in one read-only REPEATABLE READ
// transaction, so all checks see the same snapshot even while callbacks
// keep arriving, and records the verdict in audit_runs.
//
// With drainTimeout > 0 it first waits for the work in flight to finish
// (a drain that times out is itself a violation) and then judges every
// paid order. With drainTimeout = 0 it is a live run, for a system that
// keeps working: no wait, and orders paid within SettleWindow are left
// out of the job checks (counted in Report.Settling).
func (a *Auditor) Run(ctx context.Context, drainTimeout time.Duration) (Report, error) {
	r, err := a.run(ctx, drainTimeout)
	if err != nil {
		return r, err
	}
	err = a.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		run := models.AuditRun{
			OK: r.OK, Violations: len(r.Violations), Checks: len(r.Checked), Drained: r.Drained,
			Settling: r.Settling, Summary: summary(r), TookMS: int(r.took.Milliseconds()),
		}
		if err := tx.Create(&run).Error; err != nil {
			return err
		}
		if r.OK || a.alerts == nil {
			return nil
		}
		e, err := redEvent(tx, run, r)
		if err == nil {
			_, err = alerts.Raise(tx, a.alerts, e)
		}
		return err
	})
	if err != nil {
		return r, fmt.Errorf("audit: record the verdict: %w", store.Classify(err))
	}
	return r, nil
}

// redEvent is the audit.red alert of run, red. Its key is the last green
// run before it: every red run until the next green one is the same
// occurrence — a run repeated, or two at once, raise it once — and a red
// after a green is a new one.
func redEvent(tx *gorm.DB, run models.AuditRun, r Report) (alerts.Event, error) {
	var green int64
	if err := tx.Raw("SELECT coalesce(max(id), 0) FROM audit_runs WHERE ok AND id < ?", run.ID).Scan(&green).Error; err != nil {
		return alerts.Event{}, err
	}
	first := r.Violations[:min(len(r.Violations), 10)]
	return alerts.Event{Type: alerts.AuditRed, Key: "after-run-" + strconv.FormatInt(green, 10), At: run.CreatedAt,
		Data: map[string]any{"audit_run_id": run.ID, "violations": len(r.Violations), "summary": run.Summary, "first": first}}, nil
}

// Latest returns the verdict of the latest run, or nil before the first.
func Latest(ctx context.Context, db *gorm.DB) (*models.AuditRun, error) {
	var last []models.AuditRun
	if err := db.WithContext(ctx).Order("id DESC").Limit(1).Find(&last).Error; err != nil {
		return nil, fmt.Errorf("audit.Latest: %w", store.Classify(err))
	}
	if len(last) == 0 {
		return nil, nil
	}
	return &last[0], nil
}

// summary is one line about a report, for the dashboard.
func summary(r Report) string {
	if r.OK {
		return fmt.Sprintf("green: %d checks", len(r.Checked))
	}
	first := r.Violations[0]
	return fmt.Sprintf("RED: %d violation(s); first: %s: %s", len(r.Violations), first.Check, first.Detail)
}

func (a *Auditor) run(ctx context.Context, drainTimeout time.Duration) (Report, error) {
	start := time.Now()
	r := Report{Violations: []Violation{}, Checked: []string{}, Discarded: []Violation{}, Conflicts: []Violation{}}
	live := drainTimeout <= 0
	settledBefore := time.Now().Add(24 * time.Hour) // drained: judge every paid order
	if live {
		settledBefore = time.Now().Add(-SettleWindow)
	}
	if a.drain && !live {
		left, err := a.waitDrained(ctx, drainTimeout)
		if err != nil {
			return Report{}, fmt.Errorf("audit: drain: %w", store.Classify(err))
		}
		r.Drained = left == ""
		if left != "" {
			r.Violations = append(r.Violations, Violation{Check: "drain",
				Detail: fmt.Sprintf("work still in flight after %s: %s", drainTimeout, left)})
		}
	}
	err := a.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").Error; err != nil {
			return err
		}
		for _, c := range a.checks {
			var lines []struct{ Line, Ref string }
			q := fmt.Sprintf("SELECT line, ref FROM (%s) AS violations(line, ref) LIMIT %d", c.Query, maxLines)
			var args []any
			if strings.Contains(c.Query, "@") {
				args = append(args, map[string]any{"settled_before": settledBefore, "ends": cmp.Or(a.ends, "{}"),
					"default_end": gatewaycalls.DefaultSchedule.End().Seconds()})
			}
			if err := tx.Raw(q, args...).Scan(&lines).Error; err != nil {
				return fmt.Errorf("check %s: %w", c.Name, err)
			}
			for _, l := range lines {
				r.Violations = append(r.Violations, Violation{Check: c.Name, Detail: l.Line, Ref: l.Ref})
			}
			r.Checked = append(r.Checked, c.Name)
		}
		var lines []struct{ Line, Ref string }
		if err := tx.Raw(fmt.Sprintf("%s LIMIT %d", conflictsQuery, maxLines)).Scan(&lines).Error; err != nil {
			return fmt.Errorf("answers in conflict: %w", err)
		}
		for _, l := range lines {
			r.Conflicts = append(r.Conflicts, Violation{Check: "conflict", Detail: l.Line, Ref: l.Ref})
		}
		if len(a.checks) == len(baseChecks) {
			return nil // no job checks
		}
		lines = nil
		if err := tx.Raw(fmt.Sprintf("%s LIMIT %d", discardedQuery, maxLines)).Scan(&lines).Error; err != nil {
			return fmt.Errorf("discarded jobs: %w", err)
		}
		for _, l := range lines {
			r.Discarded = append(r.Discarded, Violation{Check: "discarded", Detail: l.Line, Ref: l.Ref})
		}
		if live {
			return tx.Raw(settlingQuery, settledBefore).Scan(&r.Settling).Error
		}
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("audit: %w", store.Classify(err))
	}
	r.OK = len(r.Violations) == 0
	r.took = time.Since(start)
	r.Took = r.took.Round(time.Millisecond).String()
	return r, nil
}

// settlingQuery counts the paid orders a live run leaves out: paid after
// the cut-off and still without their invoice or sent email.
const settlingQuery = `
SELECT count(*) FROM orders o
WHERE o.status = 'paid' AND o.paid_at > ?
  AND (NOT EXISTS (SELECT 1 FROM invoices i WHERE i.order_id = o.id)
       AND NOT EXISTS (SELECT 1 FROM job_executions j WHERE j.idempotency_key = 'invoice:generate:' || o.id AND j.status = 'discarded')
    OR NOT EXISTS (SELECT 1 FROM outbound_emails e WHERE e.key = 'order_paid:' || o.id AND e.status = 'sent')
       AND NOT EXISTS (SELECT 1 FROM job_executions j WHERE j.idempotency_key = 'email:send:order_paid:' || o.id AND j.status = 'discarded'))`

// drainQuery counts the work still in flight: due outbox rows not yet
// handed to the queue, and paid orders whose jobs have not done their work
// (no invoice, or the order_paid email not sent), unless that job was
// discarded: it will never do it. It looks at the effects, not at job
// rows: those of finished jobs are pruned after PRUNE_AFTER (a discarded
// job's row is not pruned).
const drainQuery = `
SELECT (SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND process_at <= now()) AS outbox,
       (SELECT count(*) FROM orders o
        WHERE o.status = 'paid'
          AND (NOT EXISTS (SELECT 1 FROM invoices i WHERE i.order_id = o.id)
               AND NOT EXISTS (SELECT 1 FROM job_executions j
                               WHERE j.idempotency_key = 'invoice:generate:' || o.id AND j.status = 'discarded')
            OR NOT EXISTS (SELECT 1 FROM outbound_emails e
                           WHERE e.key = 'order_paid:' || o.id AND e.status = 'sent')
               AND NOT EXISTS (SELECT 1 FROM job_executions j
                               WHERE j.idempotency_key = 'email:send:order_paid:' || o.id AND j.status = 'discarded'))) AS orders`

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

// Print writes a report for people: a drain that timed out, then one line
// per check in the order of their IDs, then a summary that counts those
// lines.
func (a *Auditor) Print(w io.Writer, r Report) {
	byCheck := map[string][]string{}
	for _, v := range r.Violations {
		byCheck[v.Check] = append(byCheck[v.Check], v.Detail)
	}
	if lines := byCheck["drain"]; len(lines) > 0 {
		fmt.Fprintf(w, "FAIL  drain: %s\n", lines[0])
	}
	printed := 0
	for _, c := range a.checks {
		printed++
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
	for _, d := range r.Discarded {
		fmt.Fprintf(w, "info  discarded: %s\n", d.Detail)
	}
	for _, c := range r.Conflicts {
		fmt.Fprintf(w, "info  conflict: %s\n", c.Detail)
	}
	if r.Settling > 0 {
		fmt.Fprintf(w, "        %d paid order(s) paid within the last %s were left out of the job checks (live run)\n", r.Settling, SettleWindow)
	}
	if r.OK {
		fmt.Fprintf(w, "integrity audit: green (%d checks, %s)\n", printed, r.Took)
	} else {
		fmt.Fprintf(w, "integrity audit: RED, %d violation(s) (%d checks, %s)\n", len(r.Violations), printed, r.Took)
	}
}
