// Package catchup asks the gateways what Sekali may have missed — after
// an outage longer than their retries — and feeds their answers through
// the callback pipeline under the same keys as their notifications, so a
// payment both found here and delivered is applied once. A gateway whose
// API lists its undelivered notifications is asked for those; the
// others are asked the status of every open order
// and open refund. Each run is a row of catch_up_runs: the console lists
// them, and the next run starts where the last one did.
package catchup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

const (
	// DefaultSince is how far back a run looks when none ran before:
	// the longest a gateway retries a webhook is three days.
	DefaultSince = 72 * time.Hour
	// MaxSince is the furthest back a run may look: the longest a
	// gateway keeps its events is 30 days.
	MaxSince = 30 * 24 * time.Hour
	// overlap is how much earlier than the last run's start the next
	// one begins: an event made as that run began is not missed, and a
	// second look at one costs a duplicate.
	overlap = 5 * time.Minute
	// clockSlack is how long before a run starts its caller may have
	// computed "MaxSince ago" (sekali catch-up --since 720h).
	clockSlack = time.Minute
	// maxError bounds the error kept on a run's row.
	maxError = 2000
)

// Service runs catch-ups.
type Service struct {
	db      *gorm.DB
	log     *slog.Logger
	now     func() time.Time
	pay     *payments.Service
	listers []payments.MissedLister
	clients []payments.StatusClient
	tasks   Tasks
}

// Tasks builds the outbox row of a catch-up asked for at now
// (jobs.Tasks): the worker runs it.
type Tasks interface {
	CatchUp(now time.Time, admin string) models.OutboxMessage
}

// New returns the catch-up of the gateways that list their missed
// notifications (listers) and of those that answer status questions
// (clients; a gateway that lists is not asked about its orders too),
// applying through pay.
// tasks may be nil where nobody asks for a run (the command).
func New(db *gorm.DB, log *slog.Logger, now func() time.Time, pay *payments.Service, listers []payments.MissedLister, clients []payments.StatusClient, tasks Tasks) *Service {
	s := &Service{db: db, log: log, now: now, pay: pay, listers: listers, tasks: tasks}
	for _, c := range clients {
		if !lists(listers, c.Provider()) {
			s.clients = append(s.clients, c)
		}
	}
	return s
}

func lists(listers []payments.MissedLister, provider string) bool {
	for _, l := range listers {
		if l.Provider() == provider {
			return true
		}
	}
	return false
}

// Since is where a run that is given no start begins: the start of the
// last run that finished without an error, less a few minutes, or
// DefaultSince ago when none did; never more than MaxSince ago.
func (s *Service) Since(ctx context.Context) (time.Time, error) {
	now := s.now().UTC()
	var last models.CatchUpRun // the last run that asked every gateway fully
	err := s.db.WithContext(ctx).Where("finished_at IS NOT NULL AND error = ''").
		Order("started_at DESC").Limit(1).Find(&last).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("catchup.Since: %w", store.Classify(err))
	}
	since := now.Add(-DefaultSince)
	if last.ID != 0 {
		since = last.StartedAt.Add(-overlap)
	}
	if floor := now.Add(-MaxSince); since.Before(floor) {
		since = floor
	}
	return since.Truncate(time.Second), nil
}

// Run asks every gateway what it may have missed since `since` (the zero
// time: Since), applies the answers, and records the run, which it
// returns, with its trigger and the admin who asked for it on the
// console (askedBy, "" for none). An error of one gateway is kept on
// the run and returned after the others were asked.
func (s *Service) Run(ctx context.Context, since time.Time, trigger, askedBy string) (models.CatchUpRun, error) {
	now := s.now().UTC()
	if since.IsZero() {
		var err error
		if since, err = s.Since(ctx); err != nil {
			return models.CatchUpRun{}, err
		}
	}
	// A caller that asked for exactly MaxSince computed it a moment
	// before now: within clockSlack it gets MaxSince.
	floor := now.Add(-MaxSince)
	if since.After(now) || since.Before(floor.Add(-clockSlack)) {
		return models.CatchUpRun{}, models.Errorf(models.EInvalid, "a catch-up looks back between 0 and %s", MaxSince)
	}
	if since.Before(floor) {
		since = floor
	}
	run := models.CatchUpRun{StartedAt: now, Since: since.UTC(), Trigger: trigger, AskedBy: askedBy, Gateways: []models.CatchUpCount{}}
	if err := s.db.WithContext(ctx).Create(&run).Error; err != nil {
		return run, fmt.Errorf("catchup.Run: %w", store.Classify(err))
	}
	requestID := fmt.Sprintf("catch-up-%d", run.ID)
	var errs []error
	for _, l := range s.listers {
		c := models.CatchUpCount{Provider: l.Provider()}
		bodies, pages, err := l.Missed(ctx, since)
		c.Asked, c.Found = pages, len(bodies)
		for _, body := range bodies {
			out := s.pay.ApplyListed(ctx, l.Provider(), body, requestID)
			if out.Result == models.ResultProcessed {
				c.Applied++
			}
			if out.Status() >= 500 && err == nil { // could not be recorded now: the next run finds it again
				err = fmt.Errorf("an event could not be applied: %s", out.Detail)
			}
		}
		if err != nil {
			c.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", l.Provider(), err))
		}
		run.Gateways = append(run.Gateways, c)
	}
	asked, err := s.pay.AskOpen(ctx, s.clients, requestID)
	for _, cl := range s.clients {
		a := asked[cl.Provider()]
		c := models.CatchUpCount{Provider: cl.Provider(), Asked: a.Asked, Found: a.Found, Applied: a.Applied}
		if err := a.Err(); err != nil {
			c.Error = err.Error()
		}
		run.Gateways = append(run.Gateways, c)
	}
	if err != nil {
		errs = append(errs, err)
	}
	finished := s.now().UTC()
	run.FinishedAt = &finished
	if err := errors.Join(errs...); err != nil {
		run.Error = truncate(err.Error(), maxError)
	}
	// The row's end is written even when ctx ended: what was applied stays applied.
	res := s.db.WithContext(context.WithoutCancel(ctx)).Model(&run).
		Select("finished_at", "gateways", "error").Updates(&run)
	if res.Error != nil {
		errs = append(errs, fmt.Errorf("catchup.Run: %w", store.Classify(res.Error)))
	}
	s.log.InfoContext(ctx, "catch-up finished", "run_id", run.ID, "since", run.Since, "trigger", trigger, "asked_by", askedBy,
		"found", Found(run), "applied", Applied(run), "error", run.Error)
	return run, errors.Join(errs...)
}

// Recent are the newest n runs, newest first.
func (s *Service) Recent(ctx context.Context, n int) ([]models.CatchUpRun, error) {
	var runs []models.CatchUpRun
	if err := s.db.WithContext(ctx).Order("started_at DESC, id DESC").Limit(n).Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("catchup.Recent: %w", store.Classify(err))
	}
	return runs, nil
}

// Ask has the worker run a catch-up from the last run's start, as the
// scheduled one does, recorded as asked by admin: its task goes through
// the outbox, so it is run even if the queue is down now. Asking again
// in the same minute asks for nothing more (the first admin's stays).
func (s *Service) Ask(ctx context.Context, admin string) error {
	if s.tasks == nil {
		return models.Errorf(models.EInvalid, "this server cannot ask for a catch-up")
	}
	if err := outbox.Add(s.db.WithContext(ctx), s.tasks.CatchUp(s.now(), admin)); err != nil {
		return fmt.Errorf("catchup.Ask: %w", store.Classify(err))
	}
	return nil
}

// Found is how many answers of the run named a fact, over its gateways.
func Found(r models.CatchUpRun) int {
	n := 0
	for _, g := range r.Gateways {
		n += g.Found
	}
	return n
}

// Applied is how many of them changed something.
func Applied(r models.CatchUpRun) int {
	n := 0
	for _, g := range r.Gateways {
		n += g.Applied
	}
	return n
}

// Print writes the run's summary: one line per gateway, then the total.
func Print(w io.Writer, r models.CatchUpRun) {
	fmt.Fprintf(w, "catch-up %d: since %s (%s ago)\n", r.ID, r.Since.Format(time.RFC3339),
		r.StartedAt.Sub(r.Since).Round(time.Second))
	if len(r.Gateways) == 0 {
		fmt.Fprintln(w, "  no gateway to ask: none has an API key set")
	}
	for _, g := range r.Gateways {
		fmt.Fprintf(w, "  %-9s asked %d, found %d, applied %d", g.Provider, g.Asked, g.Found, g.Applied)
		if g.Error != "" {
			fmt.Fprintf(w, "  ERROR: %s", g.Error)
		}
		fmt.Fprintln(w)
	}
	verdict := "ok"
	if r.Error != "" {
		verdict = "INCOMPLETE (run it again: what it applied stays applied, once)"
	}
	fmt.Fprintf(w, "found %d, applied %d: %s\n", Found(r), Applied(r), verdict)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
