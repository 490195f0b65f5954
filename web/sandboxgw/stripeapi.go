package sandboxgw

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// The gateway speaks the part of Stripe's API that Sekali calls (once
// SpeakStripeAPI has given it the secret key): Checkout Sessions and
// refunds, in Stripe's shapes, form-encoded as stripe-go sends them, with
// Stripe's idempotency (https://docs.stripe.com/api/idempotent_requests):
// the first answer to an Idempotency-Key is saved, and the same key with
// the same parameters gets it again (Idempotent-Replayed: true); other
// parameters or another endpoint get a 400 idempotency_error; a request
// whose key is still in progress gets a 409. A request refused before it
// begins (a wrong key, a missing parameter) saves nothing. Keys are kept
// per secret key, the newest keptStripe of them, and no longer than
// Stripe's 24 hours are guaranteed for: in a sandbox, memory is the
// bound.
//
// Deviations, because the sandbox pays orders, not cards: a Checkout
// Session must name its order (metadata[order_id]), its url is the
// sandbox pay page of that order (which opens, as every link to it does,
// with the order's access token, ?t=), and it stays unpaid
// (payment_intent null). Refunds are described in stripeapi_refunds.go.

// StripeAPIPath is where the gateway answers as Stripe's API: the base
// URL (STRIPE_API_URL, stripe-go's BackendConfig.URL) is the sandbox's
// address followed by it.
const StripeAPIPath = "/sandbox/stripe"

// keptStripe bounds the idempotency keys, the sessions, the refunds and
// the charges the Stripe emulation remembers, each: the oldest go first.
const keptStripe = 10_000

// stripeAPI is the Stripe emulation's state.
type stripeAPI struct {
	mu        sync.Mutex
	secretKey string
	keys      *kept[*stripeKeyed] // by secret key and Idempotency-Key
	sessions  *kept[*stripeSession]
	refunds   *kept[*stripeRefund]
	charges   *kept[*stripeCharge] // by PaymentIntent (or charge, for a refund of a charge)
	// beginning, when set, is called as a request under a new key
	// begins: a test holds it there, in progress.
	beginning func()
}

// stripeKeyed is what an idempotency key was first used for, and, once
// that request is done, its answer.
type stripeKeyed struct {
	path, params string
	done         bool
	status       int
	body         []byte
}

// SpeakStripeAPI makes the gateway answer as Stripe's API at
// StripeAPIPath to callers that authenticate with secretKey (sk_…), as
// Stripe's API answers Sekali with STRIPE_SECRET_KEY.
func (g *Gateway) SpeakStripeAPI(secretKey string) {
	s := &g.stripe
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secretKey = secretKey
	if s.keys == nil {
		s.keys, s.sessions, s.refunds = newKept[*stripeKeyed](keptStripe), newKept[*stripeSession](keptStripe), newKept[*stripeRefund](keptStripe)
		s.charges = newKept[*stripeCharge](keptStripe)
	}
}

func (g *Gateway) mountStripe(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	failed := stripeError(http.StatusInternalServerError, "api_error", "", "",
		"The sandbox gateway failed this request on purpose (Faults.FailNext).").body
	e.POST(StripeAPIPath+"/v1/checkout/sessions", g.apiHandler(failed, g.stripePost(g.stripe.createSession)), mw...)
	e.GET(StripeAPIPath+"/v1/checkout/sessions", g.stripeGet(g.stripe.listSessions), mw...)
	e.GET(StripeAPIPath+"/v1/checkout/sessions/:id", g.stripeGet(func(c echo.Context) apiAnswer {
		return stripeRetrieve(&g.stripe, func(s *stripeAPI) *kept[*stripeSession] { return s.sessions }, "checkout.session", c.Param("id"))
	}), mw...)
	e.POST(StripeAPIPath+"/v1/refunds", g.apiHandler(failed, g.stripePost(g.createStripeRefund)), mw...)
	e.GET(StripeAPIPath+"/v1/refunds", g.stripeGet(g.stripe.listRefunds), mw...)
	e.GET(StripeAPIPath+"/v1/refunds/:id", g.stripeGet(g.stripe.retrieveRefund), mw...)
}

// stripeError is Stripe's error answer.
func stripeError(status int, typ, code, param, message string) apiAnswer {
	e := map[string]string{"type": typ, "message": message}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	return jsonAnswer(status, map[string]any{"error": e})
}

func jsonAnswer(status int, v any) apiAnswer {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and structs of strings and numbers
	}
	return apiAnswer{status: status, header: http.Header{}, body: body}
}

func stripeMissing(param string) apiAnswer {
	return stripeError(http.StatusBadRequest, "invalid_request_error", "parameter_missing", param, "Missing required param: "+param+".")
}

func stripeInvalid(param, message string) apiAnswer {
	return stripeError(http.StatusBadRequest, "invalid_request_error", "parameter_invalid", param, message)
}

// authorize checks the secret key: Bearer, as stripe-go sends it, or the
// basic-auth user, as curl -u sends it. The key is the caller's
// (account's) own: idempotency keys are scoped by it.
func (s *stripeAPI) authorize(r *http.Request) (string, apiAnswer, bool) {
	key, basic := "", false
	if user, _, ok := r.BasicAuth(); ok {
		key, basic = user, true
	} else if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		key = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	s.mu.Lock()
	want := s.secretKey
	s.mu.Unlock()
	switch {
	case key == "" && !basic:
		return "", stripeError(http.StatusUnauthorized, "invalid_request_error", "", "",
			"You did not provide an API key. You need to provide your API key in the Authorization header, "+
				"using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."), false
	case want == "" || subtle.ConstantTimeCompare([]byte(key), []byte(want)) != 1:
		return "", stripeError(http.StatusUnauthorized, "invalid_request_error", "", "",
			"Invalid API Key provided: "+maskKey(key)), false
	}
	return key, apiAnswer{}, true
}

// maskKey shows a key as Stripe's error does: its kind and its last four.
func maskKey(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

// stripeGet serves a Stripe read: authorized, never faulted (the fault
// switches count the calls that act).
func (g *Gateway) stripeGet(read func(c echo.Context) apiAnswer) echo.HandlerFunc {
	return func(c echo.Context) error {
		_, refused, ok := g.stripe.authorize(c.Request())
		a := refused
		if ok {
			a = read(c)
		}
		a.header.Set("Request-Id", newID("req_"))
		return writeAnswer(c, a)
	}
}

// stripePost serves a Stripe call that acts: authorized, its form read,
// and done at most once per idempotency key. act says whether its answer
// is saved for the key: an answer to a request that did not begin (a
// parameter missing or invalid) is not.
func (g *Gateway) stripePost(act func(c echo.Context, form url.Values) (a apiAnswer, save bool)) func(echo.Context) apiAnswer {
	return func(c echo.Context) apiAnswer {
		s := &g.stripe
		secretKey, refused, ok := s.authorize(c.Request())
		if !ok {
			return refused
		}
		r := c.Request()
		if err := r.ParseForm(); err != nil {
			return stripeError(http.StatusBadRequest, "invalid_request_error", "", "", "Invalid request body: "+err.Error())
		}
		key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
		if key == "" { // no key: every call acts anew
			a, _ := act(c, r.PostForm)
			a.header.Set("Request-Id", newID("req_"))
			return a
		}
		if len(key) > 255 {
			return stripeInvalid("", "Idempotency-Key must be at most 255 characters long.")
		}
		id, path, params := secretKey+"\x00"+key, strings.TrimPrefix(r.URL.Path, StripeAPIPath), r.PostForm.Encode()
		s.mu.Lock()
		first, seen := s.keys.get(id)
		if !seen {
			first = &stripeKeyed{path: path, params: params}
			s.keys.put(id, first)
		}
		a := first.answer(key, path, params, seen)
		beginning := s.beginning
		s.mu.Unlock()
		if !seen {
			if beginning != nil {
				beginning()
			}
			var save bool
			a, save = act(c, r.PostForm)
			s.mu.Lock()
			if save {
				first.done, first.status, first.body = true, a.status, a.body
			} else if now, ok := s.keys.get(id); ok && now == first {
				s.keys.delete(id) // not begun: the key is free again
			}
			s.mu.Unlock()
		}
		a.header.Set("Idempotency-Key", key)
		a.header.Set("Request-Id", newID("req_"))
		return a
	}
}

// answer is what a request with the key gets when the key was seen:
// the saved answer, or the error of a key in progress or used otherwise.
// Called with the lock held.
func (k *stripeKeyed) answer(key, path, params string, seen bool) apiAnswer {
	switch {
	case !seen:
		return apiAnswer{}
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
		a.header.Set("Stripe-Should-Retry", "true")
		return a
	}
	a := apiAnswer{status: k.status, header: http.Header{}, body: k.body}
	a.header.Set("Idempotent-Replayed", "true")
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
// line items of price_data (the gateway knows no Prices).
func (s *stripeAPI) createSession(c echo.Context, form url.Values) (apiAnswer, bool) {
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
	payURL := c.Scheme() + "://" + c.Request().Host + payPathVia(order, tokenOf(form.Get("success_url")), "stripe")
	cs := &stripeSession{
		ID: newID("cs_test_"), Object: "checkout.session", AmountSubtotal: total, AmountTotal: total,
		CancelURL: optional(form, "cancel_url"), ClientReferenceID: optional(form, "client_reference_id"),
		Created: now.Unix(), Currency: currency, CustomerEmail: optional(form, "customer_email"), ExpiresAt: expires,
		Metadata: metadata, Mode: "payment", PaymentStatus: "unpaid", Status: "open",
		SuccessURL: optional(form, "success_url"), URL: &payURL,
	}
	s.mu.Lock()
	s.sessions.put(cs.ID, cs)
	s.mu.Unlock()
	return jsonAnswer(http.StatusOK, cs), true
}

// listSessions is GET /v1/checkout/sessions: newest first, limit (1 to
// 100, 10 by default), starting_after, created[gte] and created[lte].
func (s *stripeAPI) listSessions(c echo.Context) apiAnswer {
	q := c.QueryParams()
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return stripeInvalid("limit", "This value must be between 1 and 100.")
		}
		limit = n
	}
	bound := func(name string, def int64) int64 {
		n, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil {
			return def
		}
		return n
	}
	gte, lte := bound("created[gte]", 0), bound("created[lte]", 1<<62)
	after := q.Get("starting_after")
	page := []*stripeSession{}
	more := false
	s.mu.Lock()
	for id, cs := range s.sessions.newest {
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
	a := jsonAnswer(http.StatusOK, map[string]any{"object": "list", "url": "/v1/checkout/sessions", "has_more": more, "data": page})
	s.mu.Unlock()
	return a
}

// stripeRetrieve is GET /v1/{objects}/:id: the object, or Stripe's 404.
func stripeRetrieve[V any](s *stripeAPI, objects func(*stripeAPI) *kept[V], name, id string) apiAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := objects(s).get(id); ok {
		return jsonAnswer(http.StatusOK, v)
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
