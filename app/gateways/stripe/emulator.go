package stripe

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
)

// The Emulator speaks the part of Stripe's API that Sekali calls, at
// EmulatorPath of the sandbox gateway, to the secret key it was made
// with: Checkout Sessions, refunds (emulator_refunds.go), the events
// and the PaymentIntent search the status poll and the catch-up read
// (emulator_events.go, emulator_search.go), in Stripe's
// shapes, form-encoded as stripe-go sends them, with Stripe's
// idempotency (https://docs.stripe.com/api/idempotent_requests): the
// first answer to an Idempotency-Key is saved, and the same key with the
// same parameters gets it again (Idempotent-Replayed: true); other
// parameters or another endpoint get a 400 idempotency_error; a request
// whose key is still in progress gets a 409. A request refused before it
// begins (a wrong key, a missing parameter) saves nothing. Keys are kept
// per secret key, the newest keptStripe of them, and no longer than
// Stripe's 24 hours are guaranteed for: in a sandbox, memory is the
// bound. The fault switches apply to the calls that act (the POSTs);
// the reads are never faulted.
//
// Deviations, because the sandbox pays orders, not cards: a Checkout
// Session must name its order (metadata[order_id]), its url is the
// sandbox pay page of that order (which opens, as every link to it does,
// with the order's access token, ?t=), and it stays unpaid
// (payment_intent null).

// EmulatorPath is where the sandbox gateway answers as Stripe's API: the
// base URL (STRIPE_API_URL, stripe-go's BackendConfig.URL) is the
// sandbox's address followed by it.
const EmulatorPath = "/sandbox/stripe"

// keptStripe bounds the idempotency keys, the sessions, the refunds, the
// charges, the events and the PaymentIntents the Stripe emulation
// remembers, each: the oldest go first.
const keptStripe = 10_000

// Emulator is the Stripe emulation's state (payments.Emulator).
type Emulator struct {
	mu        sync.Mutex
	secretKey string
	keys      *emulation.Kept[*stripeKeyed] // by secret key and Idempotency-Key
	sessions  *emulation.Kept[*stripeSession]
	refunds   *emulation.Kept[*stripeRefund]
	charges   *emulation.Kept[*stripeCharge] // by PaymentIntent (or charge, for a refund of a charge)
	events    *emulation.Kept[stripeEvent]   // the events the sandbox gateway sent in Stripe's format
	intents   *emulation.Kept[*stripeIntent] // the PaymentIntents those events told of (emulator_search.go)
	// beginning, when set, is called as a request under a new key
	// begins: a test holds it there, in progress.
	beginning func()
	// Misstate makes the answers of Checkout Sessions and refunds state
	// another amount_total or amount, or currency, than they were made
	// with (MisstateNext).
	emulation.Misstate
}

// stripeKeyed is what an idempotency key was first used for, and, once
// that request is done, its answer.
type stripeKeyed struct {
	path, params string
	done         bool
	status       int
	body         []byte
}

// NewEmulator answers as Stripe's API to callers that authenticate with
// secretKey (sk_…), as Stripe's API answers Sekali with
// STRIPE_SECRET_KEY.
func NewEmulator(secretKey string) *Emulator {
	return &Emulator{secretKey: secretKey,
		keys:     emulation.NewKept[*stripeKeyed](keptStripe),
		sessions: emulation.NewKept[*stripeSession](keptStripe),
		refunds:  emulation.NewKept[*stripeRefund](keptStripe),
		charges:  emulation.NewKept[*stripeCharge](keptStripe),
		events:   emulation.NewKept[stripeEvent](keptStripe),
		intents:  emulation.NewKept[*stripeIntent](keptStripe),
	}
}

// Provider implements payments.Emulator.
func (*Emulator) Provider() string { return Name }

// Path implements payments.Emulator.
func (*Emulator) Path() string { return EmulatorPath }

// Handler implements payments.Emulator.
func (s *Emulator) Handler(sb payments.Sandbox) http.Handler {
	failed := stripeError(http.StatusInternalServerError, "api_error", "", "",
		"The sandbox gateway failed this request on purpose (Faults.FailNext).").Body
	acts := func(act func(r *http.Request, form url.Values) (emulation.Answer, bool)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			sb.Call(w, r, failed, func() (int, http.Header, []byte) {
				a := s.post(r, act)
				return a.Status, a.Header, a.Body
			})
		}
	}
	reads := func(read func(r *http.Request) emulation.Answer) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { s.get(r, read).Write(w) }
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/checkout/sessions", acts(func(r *http.Request, form url.Values) (emulation.Answer, bool) {
		return s.createSession(r, form, sb)
	}))
	mux.Handle("GET /v1/checkout/sessions", reads(s.listSessions))
	mux.Handle("GET /v1/checkout/sessions/{id}", reads(func(r *http.Request) emulation.Answer {
		return stripeRetrieve(s, s.sessions, "checkout.session", r.PathValue("id"))
	}))
	mux.Handle("POST /v1/refunds", acts(func(r *http.Request, form url.Values) (emulation.Answer, bool) {
		return s.createRefund(form, sb)
	}))
	mux.Handle("GET /v1/refunds", reads(s.listRefunds))
	mux.Handle("GET /v1/refunds/{id}", reads(s.retrieveRefund))
	mux.Handle("GET /v1/events", reads(func(r *http.Request) emulation.Answer { return s.listEvents(r, sb) }))
	mux.Handle("GET /v1/payment_intents/search", reads(s.searchIntents))
	return mux
}

// Reported implements payments.Emulator: the sandbox gateway reported
// PaymentIntent f.TransactionID paid f.Amount (Sekali's minor units) of
// f.Currency, what its refunds may take.
func (s *Emulator) Reported(f payments.Fact) {
	if amount, ok := Amount(f.Amount, f.Currency); ok {
		s.paid(f.TransactionID, amount, f.Currency)
	}
}

// Notified implements payments.Emulator: the event the sandbox gateway
// sends in Stripe's format is, from now on, one of the events GET
// /v1/events lists (emulator_events.go), and the PaymentIntent it
// tells of is one GET /v1/payment_intents/search finds
// (emulator_search.go).
func (s *Emulator) Notified(_ payments.Fact, body []byte) {
	s.sent(body)
	s.intentTold(body)
}

// stripeError is Stripe's error answer.
func stripeError(status int, typ, code, param, message string) emulation.Answer {
	e := map[string]string{"type": typ, "message": message}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	return emulation.JSON(status, map[string]any{"error": e})
}

func stripeMissing(param string) emulation.Answer {
	return stripeError(http.StatusBadRequest, "invalid_request_error", "parameter_missing", param, "Missing required param: "+param+".")
}

func stripeInvalid(param, message string) emulation.Answer {
	return stripeError(http.StatusBadRequest, "invalid_request_error", "parameter_invalid", param, message)
}

// authorize checks the secret key: Bearer, as stripe-go sends it, or the
// basic-auth user, as curl -u sends it. The key is the caller's
// (account's) own: idempotency keys are scoped by it.
func (s *Emulator) authorize(r *http.Request) (string, emulation.Answer, bool) {
	key, basic := "", false
	if user, _, ok := r.BasicAuth(); ok {
		key, basic = user, true
	} else if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		key = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	switch {
	case key == "" && !basic:
		return "", stripeError(http.StatusUnauthorized, "invalid_request_error", "", "",
			"You did not provide an API key. You need to provide your API key in the Authorization header, "+
				"using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."), false
	case s.secretKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.secretKey)) != 1:
		return "", stripeError(http.StatusUnauthorized, "invalid_request_error", "", "",
			"Invalid API Key provided: "+maskKey(key)), false
	}
	return key, emulation.Answer{}, true
}

// maskKey shows a key as Stripe's error does: its kind and its last four.
func maskKey(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

// get answers a Stripe read: authorized, never faulted (the fault
// switches count the calls that act).
func (s *Emulator) get(r *http.Request, read func(r *http.Request) emulation.Answer) emulation.Answer {
	_, refused, ok := s.authorize(r)
	a := refused
	if ok {
		a = read(r)
	}
	a.Header.Set("Request-Id", emulation.NewID("req_"))
	return a
}

// post answers a Stripe call that acts: authorized, its form read, and
// done at most once per idempotency key. act says whether its answer is
// saved for the key: an answer to a request that did not begin (a
// parameter missing or invalid) is not.
func (s *Emulator) post(r *http.Request, act func(r *http.Request, form url.Values) (a emulation.Answer, save bool)) emulation.Answer {
	secretKey, refused, ok := s.authorize(r)
	if !ok {
		return refused
	}
	if err := r.ParseForm(); err != nil {
		return stripeError(http.StatusBadRequest, "invalid_request_error", "", "", "Invalid request body: "+err.Error())
	}
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" { // no key: every call acts anew
		a, _ := act(r, r.PostForm)
		a.Header.Set("Request-Id", emulation.NewID("req_"))
		return a
	}
	if len(key) > 255 {
		return stripeInvalid("", "Idempotency-Key must be at most 255 characters long.")
	}
	id, path, params := secretKey+"\x00"+key, r.URL.Path, r.PostForm.Encode() // the path below EmulatorPath
	s.mu.Lock()
	first, seen := s.keys.Get(id)
	if !seen {
		first = &stripeKeyed{path: path, params: params}
		s.keys.Put(id, first)
	}
	a := first.answer(key, path, params, seen)
	beginning := s.beginning
	s.mu.Unlock()
	if !seen {
		if beginning != nil {
			beginning()
		}
		var save bool
		a, save = act(r, r.PostForm)
		s.mu.Lock()
		if save {
			first.done, first.status, first.body = true, a.Status, a.Body
		} else if now, ok := s.keys.Get(id); ok && now == first {
			s.keys.Delete(id) // not begun: the key is free again
		}
		s.mu.Unlock()
	}
	a.Header.Set("Idempotency-Key", key)
	a.Header.Set("Request-Id", emulation.NewID("req_"))
	return a
}

// answer is what a request with the key gets when the key was seen:
// the saved answer, or the error of a key in progress or used otherwise.
// Called with the lock held.
func (k *stripeKeyed) answer(key, path, params string, seen bool) emulation.Answer {
	switch {
	case !seen:
		return emulation.Answer{}
	case k.path != path:
		return stripeError(http.StatusBadRequest, "idempotency_error", "", "", fmt.Sprintf(
			"Keys for idempotent requests can only be used for the same endpoint they were first used for ('%s' vs '%s'). "+
				"Try using a key other than '%s' if you meant to execute a different request.", k.path, path, key))
	case k.params != params:
		return stripeError(http.StatusBadRequest, "idempotency_error", "", "", fmt.Sprintf(
			"Keys for idempotent requests can only be used with the same parameters they were first used with. "+
				"Try using a key other than '%s' if you meant to execute a different request.", key))
	case !k.done:
		a := stripeError(http.StatusConflict, "idempotency_error", "", "", fmt.Sprintf(
			"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, "+
				"and the other request is still going through): %s. Please try again later.", key))
		a.Header.Set("Stripe-Should-Retry", "true")
		return a
	}
	a := emulation.Answer{Status: k.status, Header: http.Header{}, Body: k.body}
	a.Header.Set("Idempotent-Replayed", "true")
	return a
}

// stripeSession is a Checkout Session, in Stripe's shape (the fields
// Sekali reads, and those that say what was asked).
type stripeSession struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	AmountSubtotal    int64             `json:"amount_subtotal"`
	AmountTotal       int64             `json:"amount_total"`
	CancelURL         *string           `json:"cancel_url"`
	ClientReferenceID *string           `json:"client_reference_id"`
	Created           int64             `json:"created"`
	Currency          string            `json:"currency"`
	CustomerEmail     *string           `json:"customer_email"`
	ExpiresAt         int64             `json:"expires_at"`
	Livemode          bool              `json:"livemode"`
	Metadata          map[string]string `json:"metadata"`
	Mode              string            `json:"mode"`
	PaymentIntent     *string           `json:"payment_intent"` // created when the session is paid
	PaymentStatus     string            `json:"payment_status"`
	Status            string            `json:"status"`
	SuccessURL        *string           `json:"success_url"`
	URL               *string           `json:"url"`
}

// createSession is POST /v1/checkout/sessions, in payment mode, with
// line items of price_data (the emulation knows no Prices).
func (s *Emulator) createSession(r *http.Request, form url.Values, sb payments.Sandbox) (emulation.Answer, bool) {
	switch form.Get("mode") {
	case "":
		return stripeMissing("mode"), false
	case "payment":
	default:
		return stripeInvalid("mode", "The sandbox gateway emulates Checkout in payment mode only."), false
	}
	var total int64
	currency := strings.ToLower(form.Get("currency"))
	for i := 0; ; i++ {
		item := fmt.Sprintf("line_items[%d]", i)
		if !hasPrefixKey(form, item) {
			if i == 0 {
				return stripeMissing("line_items"), false
			}
			break
		}
		if price := form.Get(item + "[price]"); price != "" {
			return stripeError(http.StatusBadRequest, "invalid_request_error", "resource_missing", item+"[price]",
				fmt.Sprintf("No such price: '%s'", price)), false
		}
		for _, p := range []string{"[quantity]", "[price_data][currency]", "[price_data][unit_amount]"} {
			if form.Get(item+p) == "" {
				return stripeMissing(item + p), false
			}
		}
		qty, err1 := strconv.ParseInt(form.Get(item+"[quantity]"), 10, 64)
		unit, err2 := strconv.ParseInt(form.Get(item+"[price_data][unit_amount]"), 10, 64)
		if err1 != nil || err2 != nil || qty < 1 || unit < 0 {
			return stripeInvalid(item, "Invalid integer: quantity must be positive and unit_amount not negative."), false
		}
		cur := strings.ToLower(form.Get(item + "[price_data][currency]"))
		if currency != "" && cur != currency {
			return stripeInvalid(item+"[price_data][currency]", "All line items must have the same currency."), false
		}
		currency, total = cur, total+qty*unit
	}
	metadata := stripeMetadata(form)
	order := metadata["order_id"]
	if order == "" {
		return stripeError(http.StatusBadRequest, "invalid_request_error", "parameter_missing", "metadata[order_id]",
			"The sandbox gateway pays orders: metadata[order_id] names the order."), false
	}
	now := time.Now()
	expires := now.Add(24 * time.Hour).Unix()
	if v := form.Get("expires_at"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return stripeInvalid("expires_at", "Invalid integer: "+v), false
		}
		expires = n
	}
	payURL := sb.PayURL(r, order, form.Get("success_url"))
	cs := &stripeSession{
		ID: emulation.NewID("cs_test_"), Object: "checkout.session", AmountSubtotal: total, AmountTotal: total,
		CancelURL: optional(form, "cancel_url"), ClientReferenceID: optional(form, "client_reference_id"),
		Created: now.Unix(), Currency: currency, CustomerEmail: optional(form, "customer_email"), ExpiresAt: expires,
		Metadata: metadata, Mode: "payment", PaymentStatus: "unpaid", Status: "open",
		SuccessURL: optional(form, "success_url"), URL: &payURL,
	}
	s.mu.Lock()
	s.sessions.Put(cs.ID, cs)
	s.mu.Unlock()
	answered := *cs
	answered.AmountTotal, answered.Currency = s.misstate(cs.AmountTotal, cs.Currency)
	answered.AmountSubtotal = answered.AmountTotal
	return emulation.JSON(http.StatusOK, &answered), true
}

// misstate is amount (Stripe's units) of currency (lower case) as the
// answer being written states it: as it is, unless the Misstate switch
// says otherwise.
func (s *Emulator) misstate(amount int64, currency string) (int64, string) {
	by, other, ok := s.Misstated()
	if !ok {
		return amount, currency
	}
	delta, _ := Amount(max(by, -by), strings.ToUpper(currency))
	if by < 0 {
		delta = -delta
	}
	if other != "" {
		currency = strings.ToLower(other)
	}
	return amount + delta, currency
}

// listSessions is GET /v1/checkout/sessions: newest first, limit (1 to
// 100, 10 by default), starting_after, created[gte] and created[lte].
func (s *Emulator) listSessions(r *http.Request) emulation.Answer {
	q := r.URL.Query()
	limit, refused := listLimit(q)
	if refused.Body != nil {
		return refused
	}
	gte, lte := createdBounds(q)
	after := q.Get("starting_after")
	page := []*stripeSession{}
	more := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, cs := range s.sessions.Newest {
		if after != "" {
			if id == after {
				after = ""
			}
			continue
		}
		if cs.Created < gte || cs.Created > lte {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, cs)
	}
	return emulation.JSON(http.StatusOK, map[string]any{"object": "list", "url": "/v1/checkout/sessions", "has_more": more, "data": page})
}

// createdBounds are a list's created[gte] and created[lte]: no bound
// where one is absent or not a number.
func createdBounds(q url.Values) (gte, lte int64) {
	bound := func(name string, def int64) int64 {
		n, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil {
			return def
		}
		return n
	}
	return bound("created[gte]", 0), bound("created[lte]", 1<<62)
}

// listLimit is a list's limit: 1 to 100, 10 by default; or Stripe's 400.
func listLimit(q url.Values) (int, emulation.Answer) {
	v := q.Get("limit")
	if v == "" {
		return 10, emulation.Answer{}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, stripeInvalid("limit", "This value must be between 1 and 100.")
	}
	return n, emulation.Answer{}
}

// stripeRetrieve is GET /v1/{objects}/{id}: the object, or Stripe's 404.
func stripeRetrieve[V any](s *Emulator, objects *emulation.Kept[V], name, id string) emulation.Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := objects.Get(id); ok {
		return emulation.JSON(http.StatusOK, v)
	}
	return stripeError(http.StatusNotFound, "invalid_request_error", "resource_missing", "id",
		fmt.Sprintf("No such %s: '%s'", name, id))
}

// stripeMetadata reads metadata[k]=v pairs.
func stripeMetadata(form url.Values) map[string]string {
	m := map[string]string{}
	for k, vs := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(vs) > 0 {
			m[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	return m
}

// optional is a parameter that Stripe answers as null when not given.
func optional(form url.Values, name string) *string {
	if v := form.Get(name); v != "" {
		return &v
	}
	return nil
}

func hasPrefixKey(form url.Values, prefix string) bool {
	for k := range form {
		if strings.HasPrefix(k, prefix+"[") {
			return true
		}
	}
	return false
}
