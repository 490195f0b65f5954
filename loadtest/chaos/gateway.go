package main

// The gateway the processes call. Sekali calls a gateway too: it opens a
// Stripe Checkout Session when a customer presses Pay, and asks for the
// refunds an admin asks for, and each call must happen once in effect
// whatever fails. The run hosts the sandbox gateway's emulation of
// Stripe's API in this process — never killed, so what the gateway made
// outlives every fault — points every process at it
// (PAYMENT_GATEWAY=stripe), makes its calls fail at random moments (a 500
// before acting; or acting and never answering, until the caller gives
// up) and, after each round, compares what the gateway made with what
// Sekali recorded (compare).

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	stripego "github.com/stripe/stripe-go/v82"

	stripegw "github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// The calls the gateway counts faults of, and the faults.
const (
	pageCall   = 0 // POST /v1/checkout/sessions
	refundCall = 1 // POST /v1/refunds

	failedCall = 0 // answered 500 before acting (Faults.FailNext)
	heldCall   = 1 // acted, and never answered (Faults.TimeOutAfterActing)
)

// faultsMet counts the calls that met a fault, by call and fault.
type faultsMet [2][2]int

func (m faultsMet) String() string {
	return fmt.Sprintf("Checkout Sessions %d×500, %d×no answer; refunds %d×500, %d×no answer",
		m[pageCall][failedCall], m[pageCall][heldCall], m[refundCall][failedCall], m[refundCall][heldCall])
}

func (m *faultsMet) add(o faultsMet) {
	for c := range m {
		for f := range m[c] {
			m[c][f] += o[c][f]
		}
	}
}

// stripeGateway is the emulated Stripe every process calls.
type stripeGateway struct {
	g    *sandboxgw.Sandbox
	srv  *httptest.Server
	key  string           // STRIPE_SECRET_KEY
	hook string           // STRIPE_WEBHOOK_SECRET: the payments' notifications are signed with it
	api  *stripego.Client // the run's own reads of what the gateway made
	send payments.Sender  // writes and signs Stripe's notifications

	mu   sync.Mutex
	met  faultsMet    // since the last endRound
	due  faultsMet    // faults waiting for calls of their kind, by call and fault
	met1 [2][2]func() // reports the first call that meets a due fault
}

// notifyRetries is when the gateway tries a notification again that
// was not answered 2xx: longer than the sandbox's own schedule, so that a
// refund's notification outlives a kill or a cut of the web process it
// goes to (Stripe tries for days).
var notifyRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}

// newStripe takes a free port for the emulated Stripe API; serve starts
// it once the web processes' addresses are known.
func newStripe() *stripeGateway {
	return &stripeGateway{key: "sk_test_chaos_" + randomHex(12), hook: "whsec_" + randomHex(16), srv: httptest.NewUnstartedServer(nil)}
}

// serve starts the gateway. Its own notifications — Stripe's
// charge.refunded after each refund it makes — go to callbackURL, a web
// process.
func (s *stripeGateway) serve(callbackURL string) error {
	var err error
	if s.send, err = stripegw.NewSender(s.hook); err != nil {
		return err
	}
	if s.api, err = stripegw.NewAPIClient(s.key, s.apiURL()); err != nil {
		return err
	}
	// No orders service: only its Stripe API is asked, never its pages.
	s.g = sandboxgw.New(nil, []byte(randomHex(16)), callbackURL, slog.New(slog.DiscardHandler))
	s.g.Speak(s.send)
	s.g.Emulate(stripegw.NewEmulator(s.key))
	s.g.Retries = notifyRetries
	e := echo.New()
	s.g.Mount(e)
	s.srv.Config.Handler = s.counting(e)
	s.srv.Start()
	return nil
}

// apiURL is STRIPE_API_URL.
func (s *stripeGateway) apiURL() string {
	return "http://" + s.srv.Listener.Addr().String() + stripegw.EmulatorPath
}

// env points a process at the gateway.
func (s *stripeGateway) env() []string {
	return []string{"PAYMENT_GATEWAY=stripe", "STRIPE_SECRET_KEY=" + s.key, "STRIPE_API_URL=" + s.apiURL(), "STRIPE_WEBHOOK_SECRET=" + s.hook}
}

func (s *stripeGateway) close() {
	if s.g != nil {
		s.g.Close() // no more notifications
	}
	s.srv.CloseClientConnections() // calls held unanswered end here
	s.srv.Close()
}

// arm sets a fault switch.
func (s *stripeGateway) arm(f gatewayFault) {
	if f.Later {
		s.g.Faults().FailRefundsLater(f.N)
		return
	}
	if f.Hang {
		s.g.Faults().TimeOutAfterActing(f.N)
	} else {
		s.g.Faults().FailNext(f.N)
	}
}

// armAtCall keeps f for the next f.N calls of its kind (f.On), which
// the counting middleware fails itself — exactly those calls, whatever
// others come at the same moment. They wait past the storm, until the
// round ends: a refund asked late in the storm is sent after it. met
// reports the first call that meets it.
func (s *stripeGateway) armAtCall(f gatewayFault, met func()) {
	call := slices.Index(callNames[:], f.On)
	fault := failedCall
	if f.Hang {
		fault = heldCall
	}
	s.mu.Lock()
	s.due[call][fault] += f.N
	s.met1[call][fault] = met
	s.mu.Unlock()
}

// takeDue says which due fault, if any, this call of its kind meets.
func (s *stripeGateway) takeDue(call int) (fault int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fault := range s.due[call] {
		if s.due[call][fault] > 0 {
			s.due[call][fault]--
			s.met[call][fault]++
			if met := s.met1[call][fault]; met != nil {
				s.met1[call][fault] = nil
				defer met()
			}
			return fault, true
		}
	}
	return 0, false
}

// disarm turns the gateway's own switches off at the storm's end; the
// faults due to calls of a kind, and refunds to fail later, wait until
// endRound.
func (s *stripeGateway) disarm() {
	s.g.Faults().FailNext(0)
	s.g.Faults().TimeOutAfterActing(0)
}

// endRound returns the faults calls met in the round and forgets the
// ones no call met.
func (s *stripeGateway) endRound() faultsMet {
	s.g.Faults().FailRefundsLater(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.met
	s.met, s.due, s.met1 = faultsMet{}, faultsMet{}, [2][2]func(){}
	return m
}

// stripeFailed is Stripe's answer to a call that failed on its side.
const stripeFailed = `{"error":{"type":"api_error","message":"An unknown error occurred"}}`

// counting counts the calls that meet a fault, and fails the calls of a
// kind that faults are due to (armAtCall). The gateway's own switches
// fail whichever calls come next; a call met them when it is answered
// 500 (the gateway's own errors are other statuses), or held until its
// caller gave up, which ends in http.ErrAbortHandler.
func (s *stripeGateway) counting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := -1
		switch {
		case r.Method != http.MethodPost:
		case strings.HasSuffix(r.URL.Path, "/v1/checkout/sessions"):
			call = pageCall
		case strings.HasSuffix(r.URL.Path, "/v1/refunds"):
			call = refundCall
		}
		if call < 0 {
			next.ServeHTTP(w, r)
			return
		}
		if fault, ok := s.takeDue(call); ok {
			if fault == failedCall { // before acting
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(stripeFailed))
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r) // the gateway acts…
			<-r.Context().Done()                      // …and answers nothing until the caller gives up
			panic(http.ErrAbortHandler)
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					s.count(call, heldCall)
				}
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
		if sw.status == http.StatusInternalServerError {
			s.count(call, failedCall)
		}
	})
}

func (s *stripeGateway) count(call, fault int) {
	s.mu.Lock()
	s.met[call][fault]++
	s.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// gatewayFault flips one of the gateway's fault switches during a round.
type gatewayFault struct {
	At   time.Duration // after the storm's start
	Hang bool          // TimeOutAfterActing; else FailNext
	// Later accepts the next N refunds and fails them afterwards
	// (FailRefundsLater): Stripe's pending, then refund.failed. It waits
	// for refunds until the round ends.
	Later bool
	N     int // the calls it applies to, whichever they are
	// On, when it names a kind of call (callNames), makes the fault due
	// from At to the next N calls of that kind, and to no other call
	// (armAtCall); "" flips the gateway's own switch at At, for
	// whichever calls come next.
	On string
}

// callNames name the calls, by pageCall and refundCall.
var callNames = [2]string{"session", "refund"}

func (f gatewayFault) describe() string {
	if f.Later {
		return fmt.Sprintf("gateway accepts a refund and fails it later ×%d", f.N)
	}
	what := fmt.Sprintf("gateway 500 ×%d", f.N)
	if f.Hang {
		what = fmt.Sprintf("gateway acts, no answer ×%d", f.N)
	}
	if f.On != "" {
		what += " from a " + f.On
	}
	return what
}

// gatewayRow is a gateway_requests row of Stripe's.
type gatewayRow struct {
	kind, orderID, key, phase, object, orderStatus, lastError string
	amount                                                    int64
	currency                                                  string
}

// settledRows waits (until deadline) until no refund asked of Stripe is
// planned or sent: each has its answer, and no create_payment row of a
// pending order waits either (a press after the lease records it); and
// until every refund the gateway failed after accepting it is failed in
// Sekali too (its refund.failed applied). It returns the rows still
// waiting at the end.
func (w *world) settledRows(ctx context.Context, deadline time.Time) []gatewayRow {
	var waiting []gatewayRow
	pollUntil(ctx, time.Until(deadline), func() bool {
		w.hurryRefunds(ctx)
		rows, err := w.gatewayRows(ctx, "phase IN ('planned', 'sent')")
		if err != nil {
			return false
		}
		waiting = waiting[:0]
		for _, r := range rows {
			if r.kind == string(models.GatewayRefund) || r.orderStatus == string(models.OrderPending) {
				waiting = append(waiting, r)
			}
		}
		failed, err := w.refundsFailed(ctx)
		return len(waiting) == 0 && err == nil && failed == w.stripe.g.Faults().FailedLater()
	})
	return waiting
}

// refundsFailed counts the refunds Sekali holds failed.
func (w *world) refundsFailed(ctx context.Context) (int, error) {
	var n int
	err := w.db.QueryRow(ctx, "SELECT count(*) FROM refunds WHERE status = 'failed'").Scan(&n)
	return n, err
}

// gatewayRows reads Stripe's gateway_requests rows that match where.
func (w *world) gatewayRows(ctx context.Context, where string) ([]gatewayRow, error) {
	rows, err := w.db.Query(ctx, `SELECT g.kind, g.order_id, g.idempotency_key, g.phase, g.provider_object_id, o.status, g.last_error, g.amount, g.currency
		FROM gateway_requests g JOIN orders o ON o.id = g.order_id WHERE g.provider = 'stripe' AND `+where+` ORDER BY g.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []gatewayRow
	for rows.Next() {
		var r gatewayRow
		if err := rows.Scan(&r.kind, &r.orderID, &r.key, &r.phase, &r.object, &r.orderStatus, &r.lastError, &r.amount, &r.currency); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// comparison is what compare found.
type comparison struct {
	Sessions, Refunds int      // at the gateway
	Unrecorded        int      // create_payment rows left sent: the order was paid before its page was recorded
	Problems          []string // each a violation
}

// compare holds what the gateway made against what Sekali recorded:
//
//   - every create_payment row done names the one Checkout Session the
//     gateway has of its order, of its amount; a failed one has none,
//     one still sent (its order paid before the page was recorded) at
//     most one; no session without a row;
//   - every refund row done names the one refund the gateway has under
//     its key (metadata refund_key, which the Idempotency-Key goes
//     with), of its amount; a failed one has none; no refund at the
//     gateway without a done or sent row; no refund row still waiting;
//   - no payment refunded at the gateway above what it took.
func (w *world) compare(ctx context.Context, waiting []gatewayRow) (comparison, error) {
	var c comparison
	problem := func(format string, args ...any) { c.Problems = append(c.Problems, fmt.Sprintf(format, args...)) }
	rows, err := w.gatewayRows(ctx, "true")
	if err != nil {
		return c, err
	}
	sessions := map[string][]*stripego.CheckoutSession{} // by order
	for cs, err := range w.stripe.api.V1CheckoutSessions.List(ctx, &stripego.CheckoutSessionListParams{ListParams: stripego.ListParams{Limit: stripego.Int64(100)}}) {
		if err != nil {
			return c, fmt.Errorf("list the gateway's Checkout Sessions: %w", err)
		}
		sessions[cs.Metadata["order_id"]] = append(sessions[cs.Metadata["order_id"]], cs)
		c.Sessions++
	}
	refunds := map[string][]*stripego.Refund{} // by refund_key
	var all []*stripego.Refund
	for re, err := range w.stripe.api.V1Refunds.List(ctx, &stripego.RefundListParams{ListParams: stripego.ListParams{Limit: stripego.Int64(100)}}) {
		if err != nil {
			return c, fmt.Errorf("list the gateway's refunds: %w", err)
		}
		refunds[re.Metadata["refund_key"]] = append(refunds[re.Metadata["refund_key"]], re)
		all = append(all, re)
		c.Refunds++
	}
	ids := func(n int, id func(i int) string) string {
		var s []string
		for i := range n {
			s = append(s, id(i))
		}
		return strings.Join(s, ", ")
	}

	pages, asked := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		want, ok := stripegw.Amount(r.amount, r.currency)
		if !ok {
			problem("%s %s of order %s asks %d %s, which is no Stripe amount", r.kind, r.key, r.orderID, r.amount, r.currency)
			continue
		}
		switch models.GatewayRequestKind(r.kind) {
		case models.GatewayCreatePayment:
			pages[r.orderID] = true
			got := sessions[r.orderID]
			list := ids(len(got), func(i int) string { return got[i].ID })
			switch {
			case r.phase == string(models.GatewayDone) && len(got) != 1:
				problem("create_payment of order %s is done (%s) but the gateway has %d Checkout Sessions of it: %s", r.orderID, r.object, len(got), list)
			case r.phase == string(models.GatewayDone) && (got[0].ID != r.object || got[0].AmountTotal != want):
				problem("create_payment of order %s is done as %s of %d, the gateway's session is %s of %d", r.orderID, r.object, want, got[0].ID, got[0].AmountTotal)
			case r.phase == string(models.GatewayFailed):
				problem("create_payment of order %s failed (%s); the gateway has %d session(s) of it %s", r.orderID, r.lastError, len(got), list)
			case len(got) > 1:
				problem("create_payment of order %s is %s and the gateway has %d Checkout Sessions of it: %s", r.orderID, r.phase, len(got), list)
			case (r.phase == string(models.GatewaySent) || r.phase == string(models.GatewayPlanned)) && r.orderStatus != string(models.OrderPending):
				c.Unrecorded++ // no press can record it now; the one session it may have is its order's
			}
		case models.GatewayRefund:
			// A failed row may have a refund at the gateway: one the
			// gateway failed (checked below).
			asked[r.key] = models.GatewayPhase(r.phase).WentOut()
			got := refunds[r.key]
			list := ids(len(got), func(i int) string { return got[i].ID })
			switch {
			case r.phase == string(models.GatewayDone) && len(got) != 1:
				problem("refund %s of order %s is done (%s) but the gateway has %d refunds under its key: %s", r.key, r.orderID, r.object, len(got), list)
			case r.phase == string(models.GatewayDone) && (got[0].ID != r.object || got[0].Amount != want):
				problem("refund %s of order %s is done as %s of %d, the gateway's refund is %s of %d", r.key, r.orderID, r.object, want, got[0].ID, got[0].Amount)
			case r.phase == string(models.GatewayDone) && got[0].Status == stripego.RefundStatusFailed:
				problem("refund %s of order %s is done, but the gateway failed its refund %s", r.key, r.orderID, got[0].ID)
			case r.phase == string(models.GatewayFailed) && r.lastError == payments.FailedAfterAcceptance &&
				(len(got) != 1 || got[0].ID != r.object || got[0].Status != stripego.RefundStatusFailed):
				problem("refund %s of order %s failed after the gateway accepted it (%s), but the gateway has %d refunds under its key: %s",
					r.key, r.orderID, r.object, len(got), list)
			case r.phase == string(models.GatewayFailed) && slices.ContainsFunc(got, func(re *stripego.Refund) bool { return re.Status != stripego.RefundStatusFailed }):
				// A refund the gateway failed may be learnt from its answer
				// (a repeat finds it failed) instead of its notification.
				problem("refund %s of order %s failed (%s); the gateway made %d under its key that did not fail: %s", r.key, r.orderID, r.lastError, len(got), list)
			case len(got) > 1:
				problem("refund %s of order %s is %s and the gateway made %d refunds under its key: %s", r.key, r.orderID, r.phase, len(got), list)
			}
		}
	}
	for _, r := range waiting {
		if r.kind == string(models.GatewayRefund) {
			problem("refund %s of order %s is still %s after the settling time", r.key, r.orderID, r.phase)
		} else {
			problem("create_payment of pending order %s is still %s after the settling time", r.orderID, r.phase)
		}
	}
	for _, order := range slices.Sorted(maps.Keys(sessions)) {
		if !pages[order] {
			problem("the gateway has %d Checkout Session(s) of order %q, of which Sekali asked none", len(sessions[order]), order)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(refunds)) {
		if !asked[key] {
			problem("the gateway made refund(s) %s under key %q, which no refund of Sekali's has asked",
				ids(len(refunds[key]), func(i int) string { return refunds[key][i].ID }), key)
		}
	}

	// No payment refunded above what it took.
	took, countedRefunded := map[string]int64{}, map[string]int64{}
	prs, err := w.db.Query(ctx, "SELECT provider_reference, amount, refunded_amount, currency FROM payments WHERE provider = 'stripe'")
	if err != nil {
		return c, err
	}
	for prs.Next() {
		var ref, currency string
		var amount, refundedAmount int64
		if err := prs.Scan(&ref, &amount, &refundedAmount, &currency); err != nil {
			prs.Close()
			return c, err
		}
		took[ref], _ = stripegw.Amount(amount, currency)
		countedRefunded[ref], _ = stripegw.Amount(refundedAmount, currency)
	}
	prs.Close()
	if err := prs.Err(); err != nil {
		return c, err
	}
	refunded := map[string]int64{} // what counts: refunds not failed
	for _, re := range all {
		pi := ""
		if re.PaymentIntent != nil {
			pi = re.PaymentIntent.ID
		}
		refunded[pi] += 0 // a charge whose refunds all failed counts 0
		if re.Status != stripego.RefundStatusFailed && re.Status != stripego.RefundStatusCanceled {
			refunded[pi] += re.Amount
		}
	}
	for pi, counted := range countedRefunded {
		if _, ok := refunded[pi]; !ok && counted > 0 {
			refunded[pi] = 0 // Sekali counts refunds the gateway never made
		}
	}
	for _, pi := range slices.Sorted(maps.Keys(refunded)) {
		if amount, ok := took[pi]; !ok || refunded[pi] > amount {
			problem("payment %q is refunded %d at the gateway; it took %d", pi, refunded[pi], amount)
		}
		// What Sekali counts refunded of each charge is what the gateway
		// refunded of it: a refund that failed after acceptance counts at
		// neither.
		if counted := countedRefunded[pi]; counted != refunded[pi] {
			problem("payment %q: Sekali counts %d refunded, the gateway %d (refunds that did not fail)", pi, counted, refunded[pi])
		}
	}
	return c, nil
}

// hurryRefunds brings forward, once a second at most, the next try of
// each refund job that Asynq holds for a retry while its refund's lease
// has passed: a job that failed while PostgreSQL was cut, or while the
// gateway did not answer, waits for its retry (1 s, 2 s, 4 s, … after
// each failure, jobs.RetryDelay) and for the refund's 20 s lease, and
// would try again in its own time, up to a minute later. Like the
// restarts after a round, this only brings forward what happens by
// itself; a refund whose lease holds is left alone, as a try would only
// be refused (busy) and push the next one further away.
func (w *world) hurryRefunds(ctx context.Context) {
	w.hurryMu.Lock()
	defer w.hurryMu.Unlock()
	if time.Since(w.hurried) < time.Second {
		return
	}
	w.hurried = time.Now()
	rows, err := w.db.Query(ctx, `SELECT id FROM gateway_requests WHERE kind = 'refund' AND phase IN ('planned', 'sent')
		AND (locked_until IS NULL OR locked_until < now())`)
	if err != nil {
		return
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: w.redis.addr})
	defer insp.Close()
	n := 0
	for _, id := range ids {
		args := jobs.RefundArgs{RefundRequestID: id}
		if insp.RunTask(jobs.QueueCritical, args.Kind().ID(args.Key())) == nil { // an error: not waiting for a retry (pending, running)
			n++
		}
	}
	if n > 0 {
		w.debug("%d refund job(s) waiting for a retry run now: their refund's lease has passed", n)
	}
}
