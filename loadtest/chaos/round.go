package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"regexp"

	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sekali/sekali/loadtest"
)

// reconcileAfter is the processes' RECONCILE_AFTER: short, so that tasks
// Redis lost come back within the round.
const reconcileAfter = 5 * time.Second

// asynqLease is how long after a worker's death Asynq hands its running
// tasks to another worker: a 30 s lease (fixed in Asynq v0.26) expired for
// 30 s more, plus a margin. See cmd/sekali/crash_test.go.
const asynqLease = 62 * time.Second

type faultKind int

const (
	killWeb faultKind = iota
	killWorker
	killRelay
	loseRedis
	cutDatabase
	// freezeWorker stops a worker (SIGSTOP) in the middle of a job for
	// longer than its lock and lease (JOB_LOCK_TTL) and Asynq's lease on
	// the task, lets another worker take the job over, then resumes it
	// (SIGCONT): the resumed run must be fenced off.
	freezeWorker
)

func (k faultKind) String() string {
	return [...]string{"kill web", "kill worker", "kill relay", "restart Redis without its data", "cut PostgreSQL",
		"freeze a worker past its lease"}[k]
}

// fault is one thing to break during a round's storm.
type fault struct {
	At     time.Duration // after the storm's start
	Kind   faultKind
	Target int           // kills: which process of the role (0 or 1)
	For    time.Duration // cut: its length; Redis: how long it stays down; kill: the delay before the restart
	MidJob bool          // worker kills, Redis: first wait (5 s at most) for a job in flight
	// Freeze, for Redis: pause both workers (SIGSTOP) this long before
	// Redis forgets, and resume them (SIGCONT) once it is back, so that
	// the queue holds tasks the relay handed over and nobody ran: the
	// reconciler must bring them back.
	Freeze time.Duration
}

// plan is one round: how long its storm lasts and what breaks during it.
type plan struct {
	Storm   time.Duration
	Faults  []fault
	Gateway []gatewayFault // the gateway's fault switches, flipped during the storm
}

// randomPlan draws one to three faults at random moments of the storm.
func randomPlan(rng *rand.Rand, storm time.Duration) plan {
	p := plan{Storm: storm}
	window := storm - 4*time.Second // faults start 1s in and at least 3s before the end
	for range 1 + rng.IntN(3) {
		f := fault{At: time.Second + time.Duration(rng.Int64N(int64(window))), Kind: faultKind(rng.IntN(6)), Target: rng.IntN(2)}
		switch f.Kind {
		case cutDatabase:
			f.For = 2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		case loseRedis:
			f.For = time.Duration(rng.Int64N(int64(time.Second)))
			f.MidJob = true
			if rng.IntN(2) == 0 {
				f.Freeze = time.Second + time.Duration(rng.Int64N(int64(time.Second)))
			}
		case killWorker:
			f.MidJob = true
			fallthrough
		default:
			f.For = time.Duration(rng.Int64N(int64(time.Second)))
		}
		p.Faults = append(p.Faults, f)
	}
	sort.Slice(p.Faults, func(i, j int) bool { return p.Faults[i].At < p.Faults[j].At })
	for range 1 + rng.IntN(3) {
		p.Gateway = append(p.Gateway, gatewayFault{At: time.Second + time.Duration(rng.Int64N(int64(window))), Hang: rng.IntN(2) == 0,
			N: 1 + rng.IntN(3), On: []string{"", callNames[pageCall], callNames[refundCall]}[rng.IntN(3)]})
	}
	if rng.IntN(2) == 0 { // a bank that refuses refunds days later, in one round of two
		p.Gateway = append(p.Gateway, gatewayFault{At: time.Second + time.Duration(rng.Int64N(int64(window))), Later: true, N: 1 + rng.IntN(2)})
	}
	sort.Slice(p.Gateway, func(i, j int) bool { return p.Gateway[i].At < p.Gateway[j].At })
	return p
}

// roundResult is one row of the table.
type roundResult struct {
	N            int
	Kills        [3]int   // web, worker, relay
	Interrupted  []string // jobs a worker was killed in the middle of
	Resumed      int      // of those, how many ran again and succeeded
	Frozen       []string // jobs a worker was frozen in the middle of, past its lease
	TakenOver    int      // of those, how many another worker claimed while it was frozen
	Fenced       int      // of those taken over, how many the taker finished: the resumed run could not commit them
	RedisLosses  int
	DBCuts       int
	Deliveries   uint64
	Paid         int64
	Invoices     int64
	Emails       int64 // order_paid emails sent
	Rerun        int64 // jobs claimed more than once (a kill, a lost lock or task)
	Redispatched int64 // outbox rows handed to the queue again after Redis lost them

	// The calls to the gateway.
	Orders         int       // customers' orders
	Presses        int64     // presses of Pay
	Pages          int       // orders whose Pay answered with a page
	StripePaid     int       // orders paid by the gateway's notification
	RefundsTaken   int       // refund requests answered 202
	RefundsRefused int       // answered 422 (or 409, the order refunded by then): another took what was left
	RefundsDone    int64     // refund rows done (the gateway answered it refunded)
	FailedLater    int64     // refunds the gateway accepted and then failed: given back in Sekali
	Reversed       int64     // orders a failed refund moved back (refunded → partially_refunded or paid, …)
	Succeeded      int64     // refunds (named by the gateway) that succeeded
	RefundEmails   int64     // refund_succeeded emails sent: one per succeeded refund
	GatewayFaults  faultsMet // calls that met a fault
	Sessions       int       // Checkout Sessions at the gateway, after the round
	GatewayRefunds int       // refunds at the gateway, after the round
	Unrecorded     int       // create_payment rows left sent: the order was paid before its page was recorded
	Gateway        []string  // the comparison's and the refund answers' problems: violations too

	Violations int
	Timeline   []string
	Verify     string // verify's output
}

type result struct {
	Seed   uint64
	Rounds []roundResult
	// NoRefunds is why Sekali could not ask the gateway for refunds, if
	// it said it could not: the run asked for none after that.
	NoRefunds string
}

func (r *result) violations() int {
	n := 0
	for _, x := range r.Rounds {
		n += x.Violations
	}
	return n
}

// run sets up the world, runs the rounds and prints the table. It
// returns an error only when the world could not be built or healed;
// violations are in the result.
func run(ctx context.Context, opts options) (res *result, err error) {
	res = &result{Seed: opts.Seed}
	if opts.Plans != nil {
		opts.Rounds = len(opts.Plans)
	}
	w, err := setUp(ctx, opts)
	defer func() {
		if w != nil { // an interrupted run (ctx) is no failure: it drops what it made
			w.tearDown((err != nil && ctx.Err() == nil) || res.violations() > 0)
		}
	}()
	if err != nil {
		return res, err
	}
	if opts.Plans == nil {
		w.say("seed %d (-seed=%d replays this fault schedule)", opts.Seed, opts.Seed)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5e4a11))
	for n := 1; n <= opts.Rounds; n++ {
		p := randomPlan(rng, opts.RoundDuration)
		if opts.Plans != nil {
			p = opts.Plans[n-1]
		}
		r, err := w.round(ctx, n, p)
		res.Rounds = append(res.Rounds, r)
		if err != nil {
			printTable(opts.Out, res)
			return res, fmt.Errorf("round %d: %w", n, err)
		}
		if r.Violations > 0 {
			w.say("round %d: %d violation(s); verify said:\n%s\nthe gateway against the database:\n  %s", n, r.Violations, r.Verify, strings.Join(r.Gateway, "\n  "))
			break // the audit checks the whole database: later rounds would report them again
		}
	}
	printTable(opts.Out, res)
	res.NoRefunds = w.refundsOff()
	for _, p := range w.procs {
		if exits := p.unplannedExits(); len(exits) > 0 {
			w.say("%s exited on its own %d time(s) (restarted each time): %s", p.name, len(exits), strings.Join(exits, "; "))
		}
	}
	return res, nil
}

// round storms the web processes while the plan's faults happen, heals
// the world, waits for the recovery and runs the audit.
func (w *world) round(ctx context.Context, n int, p plan) (roundResult, error) {
	r := roundResult{N: n}
	start := time.Now()
	before, err := w.effects(ctx)
	if err != nil {
		return r, err
	}
	var desc []string
	for _, f := range p.Faults {
		desc = append(desc, fmt.Sprintf("%s@%.1fs", f.describe(), f.At.Seconds()))
	}
	for _, f := range p.Gateway {
		desc = append(desc, fmt.Sprintf("%s@%.1fs", f.describe(), f.At.Seconds()))
	}
	w.say("round %d: %s storm; faults: %s", n, p.Storm, strings.Join(desc, ", "))

	// The storm: one replayer per web process, each with its own event ids.
	var deliveries atomic.Uint64
	var storms sync.WaitGroup
	deadline := start.Add(p.Storm)
	for i, target := range w.webURLs {
		storms.Add(1)
		go func() {
			defer storms.Done()
			deliveries.Add(w.storm(ctx, target, deadline, i))
		}()
	}

	// The customers who press Pay, pay and are refunded, on both.
	shop := w.newShop()
	storms.Add(1)
	go func() {
		defer storms.Done()
		shop.run(ctx, deadline)
	}()

	// The faults, each at its moment.
	var mu sync.Mutex
	var faults sync.WaitGroup
	var lastLoss time.Time
	var frozen []frozenWorker
	event := func(format string, args ...any) {
		line := fmt.Sprintf("%5.1fs ", time.Since(start).Seconds()) + fmt.Sprintf(format, args...)
		mu.Lock()
		r.Timeline = append(r.Timeline, line)
		mu.Unlock()
		w.debug("round %d: %s", n, line)
	}
	// at runs fault at its moment after the storm's start, unless the run
	// was cancelled by then.
	at := func(moment time.Duration, fault func()) {
		faults.Add(1)
		go func() {
			defer faults.Done()
			time.Sleep(time.Until(start.Add(moment))) // fault timing: sleeping to the chosen moment is the point
			if ctx.Err() != nil {
				return
			}
			fault()
		}()
	}
	for _, f := range p.Faults {
		at(f.At, func() {
			switch f.Kind {
			case killWeb, killWorker, killRelay:
				target := [][]*proc{w.webs, w.workers, w.relays}[f.Kind][f.Target]
				var jobs []string
				if f.MidJob {
					jobs = w.freezeMidJob(ctx, target, 5*time.Second)
				}
				if !target.kill(f.For) {
					event("%s: not running, not killed", target.name)
					return
				}
				mu.Lock()
				r.Kills[f.Kind]++
				r.Interrupted = append(r.Interrupted, jobs...)
				mu.Unlock()
				what := ""
				if len(jobs) > 0 {
					what = fmt.Sprintf(" in the middle of %d job(s): %s", len(jobs), strings.Join(jobs, ", "))
				}
				event("SIGKILL %s%s; restart in %s", target.name, what, f.For.Round(time.Millisecond))
			case loseRedis:
				// Put off first, then wait for a job: the storm must still
				// run when the workers pause, or nothing fills the queue.
				if wait := clearOfMinuteTurn(time.Now().Add(f.Freeze)); wait > 0 {
					event("Redis loss put off %s, past the turn of the minute", wait.Round(time.Millisecond))
					time.Sleep(wait) // fault timing: see clearOfMinuteTurn
				}
				midJob := f.MidJob && w.waitForJobInFlight(ctx, 5*time.Second)
				if f.Freeze > 0 {
					paused := time.Now()
					for _, p := range w.workers {
						p.signal(syscall.SIGSTOP)
					}
					event("workers paused (SIGSTOP) for %s: the queue fills", f.Freeze.Round(time.Millisecond))
					time.Sleep(f.Freeze) // fault timing: how long the queue fills
					// A loss must find tasks nobody ran: wait (a few seconds
					// at most) until the relay has handed one over since.
					event("%d task(s) handed to the queue since the pause", w.waitForDispatchedSince(ctx, paused, 5*time.Second))
				}
				event("Redis killed%s, down for %s", map[bool]string{true: " (a job was in flight)"}[midJob], f.For.Round(time.Millisecond))
				err := w.loseRedis(ctx, f.For)
				if f.Freeze > 0 {
					for _, p := range w.workers {
						p.signal(syscall.SIGCONT)
					}
				}
				if err != nil {
					event("Redis did not come back: %v", err)
					return
				}
				mu.Lock()
				r.RedisLosses++
				lastLoss = time.Now()
				mu.Unlock()
				event("Redis back, empty%s", map[bool]string{true: "; workers resumed (SIGCONT)"}[f.Freeze > 0])
			case freezeWorker:
				target := w.workers[f.Target]
				id := target.workerID()
				jobs := w.freezeMidJob(ctx, target, 5*time.Second)
				if len(jobs) == 0 {
					event("%s: no job in flight within 5s, not frozen", target.name)
					return
				}
				mu.Lock()
				frozen = append(frozen, frozenWorker{p: target, other: w.workers[1-f.Target], id: id, since: time.Now(), jobs: jobs})
				r.Frozen = append(r.Frozen, jobs...)
				mu.Unlock()
				event("SIGSTOP %s in the middle of %d job(s): %s; frozen past its lease", target.name, len(jobs), strings.Join(jobs, ", "))
			case cutDatabase:
				event("PostgreSQL cut for %s", f.For.Round(time.Millisecond))
				w.cutDatabase(f.For)
				mu.Lock()
				r.DBCuts++
				mu.Unlock()
				event("PostgreSQL back")
			}
		})
	}
	for _, f := range p.Gateway {
		at(f.At, func() {
			if f.On != "" && !f.Later {
				w.stripe.armAtCall(f, func() { event("%s: the first met", f.describe()) })
				event("%s: due to the next %d %s call(s)", f.describe(), f.N, f.On)
				return
			}
			w.stripe.arm(f)
			event("%s: the next %d call(s) to the gateway", f.describe(), f.N)
		})
	}
	storms.Wait()
	faults.Wait()
	r.Deliveries = deliveries.Load()
	if err := ctx.Err(); err != nil {
		return r, err
	}

	// Heal: the gateway's faults off, the proxy open, Redis up, every
	// process running and ready.
	w.stripe.disarm()
	w.enableProxy()
	if !w.redis.running() {
		if err := w.redis.start(ctx); err != nil {
			return r, err
		}
	}
	if err := w.ready(ctx, 90*time.Second); err != nil {
		return r, err
	}
	event("healed: every process ready")

	// Recovery that would otherwise wait for a clock, sped up:
	//   - tasks Redis lost come back through the reconciler, which the
	//     scheduler triggers at each minute; a scheduler that starts
	//     triggers it at once, so restart it once they are older than
	//     RECONCILE_AFTER;
	//   - a dead worker's tasks come back once Asynq's lease has expired
	//     (asynqLease), when a worker starts: restart one then.
	// Both only bring forward what happens by itself within a minute.
	// One restart per process, at the latest time a reason asks for: a
	// second restart soon after the first would kill the jobs the first
	// one recovered, and they would wait for another lease.
	type step struct {
		at      time.Time
		reasons []string
		p       *proc
	}
	var steps []*step
	restartAt := func(p *proc, at time.Time, reason string) {
		for _, s := range steps {
			if s.p == p {
				s.at = maxTime(s.at, at)
				s.reasons = append(s.reasons, reason)
				return
			}
		}
		steps = append(steps, &step{at, []string{reason}, p})
	}
	if !lastLoss.IsZero() {
		restartAt(w.scheduler, lastLoss.Add(reconcileAfter+time.Second), "reconcile the tasks Redis lost")
	}
	var died time.Time
	for _, p := range w.workers {
		if d := p.lastDeath(); d.After(start) && d.After(died) {
			died = d
		}
	}
	if !died.IsZero() {
		restartAt(w.workers[0], died.Add(asynqLease), "Asynq's lease on the dead worker's tasks has expired")
	}
	for _, f := range frozen { // a frozen worker renews no lease either: its tasks come back the same way, to the other worker
		restartAt(f.other, f.since.Add(asynqLease), "Asynq's lease on the frozen worker's tasks has expired")
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	for _, s := range steps {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(time.Until(s.at)): // a fixed clock in Asynq or the scheduler, not a condition we can poll
		}
		s.p.restart()
		event("%s restarted: %s", s.p.name, strings.Join(s.reasons, "; "))
	}

	// Resume the frozen workers once another has taken their jobs over
	// (claimed them: their fence moved on) — or once a claim waits for the
	// job row, locked by the frozen run's open transaction, which only its
	// resumption can let go — or after 75s (Asynq's recoverer runs at a
	// worker's start, then every minute). The jobs taken over by then are
	// the ones whose resumed run must be fenced off.
	for i := range frozen {
		f := &frozen[i]
		var why string
		pollUntil(ctx, 75*time.Second, func() bool {
			switch {
			case w.takenOver(ctx, f.jobs, f.id) == len(f.jobs):
				why = "its jobs taken over by another worker"
			case w.claimsWaiting(ctx) > 0:
				why = "a claim of its job waits for the row its open transaction holds"
			}
			return why != ""
		})
		f.taken = w.takenOver(ctx, f.jobs, f.id)
		f.p.signal(syscall.SIGCONT)
		event("SIGCONT %s after %s frozen (%s); %d of its %d job(s) taken over by then", f.p.name,
			time.Since(f.since).Round(time.Second), cmp.Or(why, "75s passed"), f.taken, len(f.jobs))
	}

	// What the storm's end cut short — pages not opened, payments not
	// delivered, refunds not answered — is finished, as customers and
	// admins would.
	shop.settle(ctx, time.Now().Add(w.opts.DrainTimeout))
	r.Orders, r.Pages, r.StripePaid = shop.counts()
	r.Presses = shop.presses.Load()
	event("customers settled: %d orders, Pay pressed %d times, %d pages opened, %d orders paid", r.Orders, r.Presses, r.Pages, r.StripePaid)

	// The verdict.
	out, violations, err := w.verify(ctx)
	r.Verify, r.Violations = out, violations
	if err != nil {
		return r, err
	}
	took := "?"
	if m := tookLine.FindStringSubmatch(out); m != nil {
		took = m[1]
	}
	event("verify: %d violation(s), in %s (drain and checks)", violations, took)

	// The gateway against the database, once every refund has its answer
	// (a lost one waits out its lease, then the job's next try).
	waiting := w.settledRows(ctx, time.Now().Add(w.opts.DrainTimeout))
	cmp, err := w.compare(ctx, waiting)
	if err != nil {
		return r, err
	}
	problems, taken, refused := shop.judgeRefunds()
	if succeeded, emailed := w.refundEmailsSent(ctx, time.Now().Add(w.opts.DrainTimeout)); succeeded != emailed {
		problems = append(problems, fmt.Sprintf("%d refunds succeeded, %d refund emails sent; want one each", succeeded, emailed))
	}
	r.Gateway = append(cmp.Problems, problems...)
	r.RefundsTaken, r.RefundsRefused = taken, refused
	r.Sessions, r.GatewayRefunds, r.Unrecorded = cmp.Sessions, cmp.Refunds, cmp.Unrecorded
	r.GatewayFaults = w.stripe.endRound()
	r.Violations += len(r.Gateway)
	event("gateway: %d Checkout Sessions, %d refunds; %d create_payment row(s) left sent, their order paid before the page was recorded; %d problem(s)",
		cmp.Sessions, cmp.Refunds, cmp.Unrecorded, len(r.Gateway))
	after, err := w.effects(ctx)
	if err != nil {
		return r, err
	}
	if len(r.Interrupted) > 0 {
		var resumed int64
		err := w.db.QueryRow(ctx, "SELECT count(*) FROM job_executions WHERE idempotency_key = ANY($1) AND status = 'succeeded' AND attempts > 1",
			r.Interrupted).Scan(&resumed)
		if err != nil {
			return r, err
		}
		r.Resumed = int(resumed)
		event("%d of the %d interrupted job(s) ran again and succeeded", r.Resumed, len(r.Interrupted))
	}
	for _, f := range frozen {
		// Taken over while it was frozen, and finished by the taker: the
		// frozen run, resumed with a fence behind, committed none of them.
		fenced := w.finishedByOthers(ctx, f.jobs, f.id)
		r.TakenOver += f.taken
		r.Fenced += fenced
		event("%d of the %d job(s) taken over while %s was frozen were finished by the taker; the resumed run committed none",
			fenced, f.taken, f.p.name)
	}
	r.Paid, r.Invoices, r.Emails = after[0]-before[0], after[1]-before[1], after[2]-before[2]
	r.Rerun, r.Redispatched, r.RefundsDone = after[3]-before[3], after[4]-before[4], after[5]-before[5]
	r.FailedLater, r.Succeeded, r.RefundEmails, r.Reversed = after[6]-before[6], after[7]-before[7], after[8]-before[8], after[9]-before[9]
	w.say("round %d done in %s: %d deliveries, %d paid, %d invoices, %d emails; %d jobs ran more than once, %d tasks dispatched again; "+
		"%d Pay presses, %d pages, %d paid through Stripe; refunds %d taken, %d refused, %d done, %d failed later (%d orders moved back), %d succeeded with %d emails; "+
		"gateway faults met %s; %d violation(s)",
		n, time.Since(start).Round(100*time.Millisecond), r.Deliveries, r.Paid, r.Invoices, r.Emails, r.Rerun, r.Redispatched,
		r.Presses, r.Pages, r.StripePaid, r.RefundsTaken, r.RefundsRefused, r.RefundsDone, r.FailedLater, r.Reversed, r.Succeeded, r.RefundEmails,
		r.GatewayFaults, r.Violations)
	if w.opts.Verbose || r.Violations > 0 {
		for _, line := range r.Timeline {
			w.say("  %s", line)
		}
	}
	return r, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (f fault) describe() string {
	switch f.Kind {
	case killWeb:
		return fmt.Sprintf("kill web-%d", f.Target+1)
	case killWorker:
		return fmt.Sprintf("kill worker-%d", f.Target+1)
	case killRelay:
		return fmt.Sprintf("kill relay-%d", f.Target+1)
	case cutDatabase:
		return fmt.Sprintf("cut PostgreSQL %.1fs", f.For.Seconds())
	case freezeWorker:
		return fmt.Sprintf("freeze worker-%d past its lease", f.Target+1)
	}
	if f.Freeze > 0 {
		return fmt.Sprintf("lose Redis (workers paused %.1fs)", f.Freeze.Seconds())
	}
	return "lose Redis"
}

// storm runs the loadtest scenarios against one web process, one after
// the other, until the deadline, and returns the deliveries it sent.
// Each scenario run has event ids of its own. Their verdicts are ignored:
// under faults, a delivery cut by a kill is an error and nothing more.
func (w *world) storm(ctx context.Context, target string, deadline time.Time, first int) uint64 {
	var sent uint64
	for i := first; time.Until(deadline) > 500*time.Millisecond; i++ {
		sctx, cancel := context.WithDeadline(ctx, deadline)
		scenario := w.opts.Scenarios[i%len(w.opts.Scenarios)]
		reports, err := loadtest.Run(sctx, loadtest.Config{
			Target: target, Secret: w.secret, Token: w.token,
			Events: w.opts.Events, Copies: w.opts.Copies, Concurrency: w.opts.Concurrency,
			Duration: 5 * time.Second, Rate: 50,
			// A scenario run ends by asking GET /api/audit. Here that verdict
			// would be ignored, and on a database the rounds have grown it
			// costs seconds of the storm: verify judges after the drain.
			SkipAudit: true,
		}, scenario)
		cancel()
		var n uint64
		for _, rep := range reports {
			n += rep.Requests
			if w.opts.Verbose {
				w.debug("storm %s %s: %d requests, results %v", target, scenario, rep.Requests, rep.Results)
			}
		}
		sent += n
		if ctx.Err() != nil {
			return sent
		}
		if n == 0 { // the set-up failed (a fault): do not spin
			if w.opts.Verbose && err == nil && len(reports) > 0 && len(reports[0].Problems) > 0 {
				w.debug("storm %s: %s", target, reports[0].Problems[0])
			}
			time.Sleep(250 * time.Millisecond) // back off before trying again
		}
	}
	return sent
}

// clearOfMinuteTurn is how long a Redis loss due at t must be put off so
// that the next turn of a wall-clock minute is more than
// reconcileAfter+2s away. The scheduler enqueues the reconciler at each
// turn under an id naming the minute; a loss just before a turn would be
// followed by a reconciler run that finds the lost tasks too young
// (RECONCILE_AFTER) and whose id keeps the restarted scheduler from
// running it again in that minute: the lost tasks would wait a minute
// more. (Everything still comes back; only later.)
func clearOfMinuteTurn(t time.Time) time.Duration {
	turn := t.Truncate(time.Minute).Add(time.Minute)
	if turn.Sub(t) > reconcileAfter+2*time.Second {
		return 0
	}
	return turn.Sub(t) + 500*time.Millisecond
}

// waitForDispatchedSince polls until the relay has handed at least one
// outbox row to the queue since t, and returns how many it has; 0 after
// timeout.
func (w *world) waitForDispatchedSince(ctx context.Context, t time.Time, timeout time.Duration) int64 {
	var n int64
	pollUntil(ctx, timeout, func() bool {
		err := w.db.QueryRow(ctx, "SELECT count(*) FROM outbox_messages WHERE dispatched_at >= $1", t).Scan(&n)
		return err == nil && n > 0
	})
	return n
}

// waitForJobInFlight polls until a job is processing; false after timeout.
func (w *world) waitForJobInFlight(ctx context.Context, timeout time.Duration) bool {
	return pollUntil(ctx, timeout, func() bool {
		var n int64
		err := w.db.QueryRow(ctx, "SELECT count(*) FROM job_executions WHERE status = 'processing'").Scan(&n)
		return err == nil && n > 0
	})
}

// pollUntil asks cond every 5 ms until it holds (true), or until timeout
// or ctx ends (false).
func pollUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	return false
}

// freezeMidJob waits (up to timeout) until the worker p runs a job, and
// leaves it frozen (SIGSTOP) in the middle of it: a process that cannot
// run cannot finish its job before the kill. It returns the jobs it holds
// ("processing" rows under its WORKER_ID that stay so while it is
// frozen), or nil after timeout, with p running.
func (w *world) freezeMidJob(ctx context.Context, p *proc, timeout time.Duration) []string {
	inFlight := func(id string) []string {
		var keys []string
		rows, err := w.db.Query(ctx, "SELECT idempotency_key FROM job_executions WHERE status = 'processing' AND worker_id = $1", id)
		if err != nil {
			return nil
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if rows.Scan(&k) == nil {
				keys = append(keys, k)
			}
		}
		return keys
	}
	var keys []string
	pollUntil(ctx, timeout, func() bool {
		id := p.workerID()
		if id == "" || len(inFlight(id)) == 0 {
			return false
		}
		p.signal(syscall.SIGSTOP)
		// A COMMIT it sent just before may still land: give it a moment.
		time.Sleep(50 * time.Millisecond) // fault timing, while the process is frozen
		if keys = inFlight(id); len(keys) > 0 {
			return true
		}
		p.signal(syscall.SIGCONT)
		return false
	})
	return keys
}

// effects counts paid orders (refunded since, or not), invoices and sent
// order_paid emails; the jobs claimed more than once, and the outbox rows
// dispatched more than once without a relay error (the reconciler's
// work: a relay that failed to enqueue records last_error); the refunds
// done; the refunds failed after acceptance, and those that succeeded
// (named by the gateway, not a charge total) with their sent emails; and
// the orders a failed refund moved back.
func (w *world) effects(ctx context.Context) ([10]int64, error) {
	var e [10]int64
	err := w.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE status IN ('paid', 'partially_refunded', 'refunded')),
	       (SELECT count(*) FROM invoices),
	       (SELECT count(*) FROM outbound_emails WHERE status = 'sent' AND key LIKE 'order_paid:%'),
	       (SELECT count(*) FROM job_executions WHERE attempts > 1),
	       (SELECT count(*) FROM outbox_messages WHERE attempts > 1 AND last_error = ''),
	       (SELECT count(*) FROM gateway_requests WHERE kind = 'refund' AND phase = 'done'),
	       (SELECT count(*) FROM refunds WHERE status = 'failed'),
	       (SELECT count(*) FROM refunds WHERE status = 'succeeded' AND refund_key NOT LIKE '%:refunded:%'),
	       (SELECT count(*) FROM outbound_emails WHERE status = 'sent' AND key LIKE 'refund_succeeded:%'),
	       (SELECT count(*) FROM order_transitions WHERE from_status IN ('refunded', 'partially_refunded') AND to_status IN ('paid', 'partially_refunded'))`).
		Scan(&e[0], &e[1], &e[2], &e[3], &e[4], &e[5], &e[6], &e[7], &e[8], &e[9])
	return e, err
}

var (
	redLine  = regexp.MustCompile(`integrity audit: RED, (\d+) violation`)
	tookLine = regexp.MustCompile(`integrity audit: .*\(\d+ checks, ([^)]+)\)`)
)

// verify runs `sekali verify --drain-timeout=…` on the database directly
// (not through the proxy) and returns its output and the violations.
func (w *world) verify(ctx context.Context) (string, int, error) {
	out, err := w.command(ctx, []string{"DATABASE_URL=" + w.directURL}, "verify", "--drain-timeout="+w.opts.DrainTimeout.String())
	var exit *exec.ExitError
	switch {
	case err == nil && strings.Contains(out, "integrity audit: green"):
		return out, 0, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		if m := redLine.FindStringSubmatch(out); m != nil {
			n, _ := strconv.Atoi(m[1])
			return out, n, nil
		}
	}
	return out, 0, fmt.Errorf("sekali verify: %v\n%s", err, out)
}

// printTable writes one row per round and the total.
func printTable(out io.Writer, res *result) {
	var buf bytes.Buffer // one write: the test log takes it as one entry
	defer func() { out.Write(buf.Bytes()) }()
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tkills web/worker/relay\tRedis losses\tdatabase cuts\tjobs frozen past lease/taken over/fenced\tdeliveries\tpaid orders\tinvoices\temails\tjobs run again\ttasks re-dispatched\t"+
		"Pay presses/pages\trefunds taken/refused/done\trefunds failed later/reversed\trefunds succeeded/emailed\tgateway faults 500/no answer\tviolations\t")
	row := func(name string, r roundResult, frozen int) {
		fmt.Fprintf(tw, "%s\t%d/%d/%d\t%d\t%d\t%d/%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%d/%d/%d\t%d/%d\t%d/%d\t%d/%d\t%d\t\n", name, r.Kills[0], r.Kills[1], r.Kills[2],
			r.RedisLosses, r.DBCuts, frozen, r.TakenOver, r.Fenced, r.Deliveries, r.Paid, r.Invoices, r.Emails, r.Rerun, r.Redispatched,
			r.Presses, r.Pages, r.RefundsTaken, r.RefundsRefused, r.RefundsDone, r.FailedLater, r.Reversed, r.Succeeded, r.RefundEmails,
			r.GatewayFaults[pageCall][failedCall]+r.GatewayFaults[refundCall][failedCall], r.GatewayFaults[pageCall][heldCall]+r.GatewayFaults[refundCall][heldCall],
			r.Violations)
	}
	var t roundResult
	var frozen int
	for _, r := range res.Rounds {
		row(fmt.Sprint(r.N), r, len(r.Frozen))
		frozen += len(r.Frozen)
		for i := range t.Kills {
			t.Kills[i] += r.Kills[i]
		}
		t.RedisLosses += r.RedisLosses
		t.DBCuts += r.DBCuts
		t.TakenOver += r.TakenOver
		t.Fenced += r.Fenced
		t.Deliveries += r.Deliveries
		t.Paid += r.Paid
		t.Invoices += r.Invoices
		t.Emails += r.Emails
		t.Rerun += r.Rerun
		t.Redispatched += r.Redispatched
		t.Presses += r.Presses
		t.Pages += r.Pages
		t.RefundsTaken += r.RefundsTaken
		t.RefundsRefused += r.RefundsRefused
		t.RefundsDone += r.RefundsDone
		t.FailedLater += r.FailedLater
		t.Reversed += r.Reversed
		t.Succeeded += r.Succeeded
		t.RefundEmails += r.RefundEmails
		t.GatewayFaults.add(r.GatewayFaults)
		t.Violations += r.Violations
	}
	row("total", t, frozen)
	tw.Flush()
	fmt.Fprintf(&buf, "gateway faults met: %s\n", t.GatewayFaults)
}

// frozenWorker is a worker stopped in the middle of jobs, to be resumed
// once another has taken them over.
type frozenWorker struct {
	p, other *proc
	id       string // its WORKER_ID when it was frozen
	since    time.Time
	jobs     []string
	taken    int // of jobs, how many another worker had claimed when it was resumed
}

// takenOver counts the jobs that another worker than id has claimed
// since (their row names another worker): a frozen run that resumes can
// no longer commit them, its fence being behind.
func (w *world) takenOver(ctx context.Context, jobs []string, id string) int {
	var n int
	w.db.QueryRow(ctx, "SELECT count(*) FROM job_executions WHERE idempotency_key = ANY($1) AND worker_id <> $2 AND fence > 1",
		jobs, id).Scan(&n)
	return n
}

// claimsWaiting counts the job claims (the guard's upsert of a job row)
// that wait for a lock another session holds.
func (w *world) claimsWaiting(ctx context.Context) int {
	var n int
	w.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
	  AND query ILIKE 'INSERT INTO "job_executions"%'`).Scan(&n)
	return n
}

// finishedByOthers counts the jobs that succeeded under another worker
// than id.
func (w *world) finishedByOthers(ctx context.Context, jobs []string, id string) int {
	var n int
	w.db.QueryRow(ctx, "SELECT count(*) FROM job_executions WHERE idempotency_key = ANY($1) AND status = 'succeeded' AND worker_id <> $2",
		jobs, id).Scan(&n)
	return n
}

// refundEmailsSent waits (until deadline) until every refund that
// succeeded has its email sent — the refunds' notifications applied
// while the round settled wrote email tasks that run after the drain —
// and returns the two counts.
func (w *world) refundEmailsSent(ctx context.Context, deadline time.Time) (succeeded, emailed int64) {
	pollUntil(ctx, time.Until(deadline), func() bool {
		err := w.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM refunds WHERE status = 'succeeded' AND refund_key NOT LIKE '%:refunded:%'),
		       (SELECT count(*) FROM outbound_emails WHERE status = 'sent' AND key LIKE 'refund_succeeded:%')`).Scan(&succeeded, &emailed)
		return err == nil && succeeded == emailed
	})
	return succeeded, emailed
}
