package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/jobs"
)

// verify is `sekali verify`: the integrity audit, one line per invariant
// in the order of their numbers (docs/README.md#the-integrity-audit).
// Exit status 1 means at least one invariant is broken.
func verify(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	drainTimeout := fs.Duration("drain-timeout", audit.DefaultDrainTimeout,
		"how long to wait for the outbox and the jobs of paid orders to finish; 0 for a live run that leaves out orders paid in the last minute")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, db, err := openDatabase(ctx, getenv)
	if err != nil {
		return err
	}
	defer store.Close(db)

	a := audit.New(db).WithSchedules(gateways.Schedules()).RaisingAlerts(jobs.Tasks{})
	report, err := a.Run(ctx, *drainTimeout)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		a.Print(stdout, report)
	}
	if !report.OK {
		return &exitError{code: 1}
	}
	return nil
}
