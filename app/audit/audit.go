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
	Took       string      `json:"took"`
}

// Auditor runs checks against a database.
type Auditor struct {
	db     *gorm.DB
	checks []Check
}

// New returns an auditor with every check of Checks.
func New(db *gorm.DB) *Auditor { return &Auditor{db: db, checks: Checks} }

// Run runs every check in one read-only REPEATABLE READ transaction, so
// all checks see the same snapshot even while callbacks keep arriving.
func (a *Auditor) Run(ctx context.Context) (Report, error) {
	start := time.Now()
	r := Report{Violations: []Violation{}, Checked: []string{}}
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

// Print writes a report for people.
func (a *Auditor) Print(w io.Writer, r Report) {
	byCheck := map[string][]string{}
	for _, v := range r.Violations {
		byCheck[v.Check] = append(byCheck[v.Check], v.Detail)
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
