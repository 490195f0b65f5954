package main

import (
	"context"
	"io"
	"time"

	"github.com/sekali/sekali/app/catchup"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// catchUp is `sekali catch-up`: ask every configured gateway what Sekali
// may have missed since --since ago (by default since the last run),
// apply it through the callback pipeline, and print what was found
// (docs/operations.md#catching-up-after-an-outage). Exit status 1 when a
// gateway could not be asked fully; running it again is safe.
func catchUp(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("catch-up", stderr)
	sinceFlag := fs.Duration("since", 0, "how far back to look, e.g. 72h (at most 720h); 0: since the last run, or 72h when none ran")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sinceFlag < 0 || *sinceFlag > catchup.MaxSince {
		return &exitError{code: 2, msg: "--since: between 0 and " + catchup.MaxSince.String()}
	}
	cfg, db, err := openDatabase(ctx, getenv)
	if err != nil {
		return err
	}
	defer store.Close(db)
	log := newLogger(stderr, cfg.LogLevel)
	set, _, err := configureGateways(cfg, getenv, cfg.HTTPAddr) // as serve's, whose web role listens at HTTP_ADDR
	if err != nil {
		return err
	}
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, set.Providers()...)
	defer pay.Close() // writes the delivery rows of what it applied
	service := catchup.New(db, log, time.Now, pay, set.Listers(), set.StatusClients(), nil)
	var since time.Time
	if *sinceFlag > 0 {
		since = time.Now().Add(-*sinceFlag)
	}
	run, err := service.Run(ctx, since, models.CatchUpByCommand, "")
	if run.ID != 0 {
		catchup.Print(stdout, run)
	}
	return err
}
