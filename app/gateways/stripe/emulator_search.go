package stripe

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sekali/sekali/app/gateways/emulation"
)

// Stripe's PaymentIntent search, as the Emulator speaks it: GET
// /v1/payment_intents/search, what the status poll asks (status.go).
//
// The emulation knows a PaymentIntent from the events the sandbox
// gateway sends of it in Stripe's format (payment_intent.succeeded,
// .payment_failed, .canceled): the event's object, as Stripe's API and
// its webhooks carry the same object, with the time it was first told
// as its created; a later event of the same PaymentIntent changes its
// status and amount_received. A lost notification is told all the same
// (the sandbox tells its emulations before it sends), so the search
// finds the payment the notification would have brought: what the poll
// is for.
//
// The query is Stripe's search query language
// (https://docs.stripe.com/search#search-query-language) over the
// PaymentIntent's query fields: clauses field:value, joined by AND or
// by OR (not both; a space is AND), at most 10, each negated by a
// leading "-". metadata['key'] (or ["key"]) and status, currency and
// customer match exactly, ignoring case, a value in single or double
// quotes (a quote inside escaped with \) or, without a space, bare
// (Stripe's own examples search last4:4242); metadata['key']:null matches
// a PaymentIntent without the key; amount and created also compare
// with >, <, >= and <= to a number. Anything else is Stripe's 400
// invalid_request_error on query. Results are newest first, limit (1
// to 100, 10 by default) a page, continued by next_page (as page);
// expand[]=total_count counts them all.
//
// Deviation: Stripe's search index lags its objects by up to a minute
// (Stripe warns against search in read-after-write flows); the
// emulation's does not.

// stripeIntent is a PaymentIntent, in Stripe's shape (the fields Sekali
// reads, and those that say what was paid).
type stripeIntent struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CaptureMethod      string            `json:"capture_method"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	Status             string            `json:"status"`
}

// intentTold keeps, or updates, the PaymentIntent a payment_intent.*
// event in Stripe's format carries.
func (s *Emulator) intentTold(body []byte) {
	var e struct {
		Type string `json:"type"`
		Data struct {
			Object stripeIntent `json:"object"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.Type, "payment_intent.") || e.Data.Object.ID == "" {
		return
	}
	told := e.Data.Object
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, known := s.intents.Get(told.ID)
	if !known {
		pi = &stripeIntent{ID: told.ID, Object: "payment_intent", CaptureMethod: "automatic", ConfirmationMethod: "automatic",
			Created: time.Now().Unix(), Metadata: map[string]string{}}
		s.intents.Put(pi.ID, pi)
	}
	// Kept in place, not put again: the search lists by creation.
	pi.Amount, pi.AmountReceived, pi.Currency, pi.Status = told.Amount, told.AmountReceived, told.Currency, told.Status
	if told.Metadata != nil {
		pi.Metadata = told.Metadata
	}
	if told.Status == "succeeded" {
		charge := "ch_" + told.ID // as the refunds name a PaymentIntent's charge
		pi.LatestCharge = &charge
	}
}

// searchIntents is GET /v1/payment_intents/search.
func (s *Emulator) searchIntents(r *http.Request) emulation.Answer {
	q := r.URL.Query()
	if q.Get("query") == "" {
		return stripeMissing("query")
	}
	match, err := parseSearch(q.Get("query"))
	if err != nil {
		return stripeInvalid("query", "The search query could not be parsed: "+err.Error())
	}
	limit, refused := listLimit(q)
	if refused.Body != nil {
		return refused
	}
	after := q.Get("page") // next_page: the id of the last one listed
	page := []*stripeIntent{}
	more, total, found := false, 0, after == ""
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, pi := range s.intents.Newest {
		matches := match(pi)
		if matches {
			total++
		}
		switch {
		case !found:
			found = id == after // the cursor, whether it still matches or not
		case !matches:
		case len(page) < limit:
			page = append(page, pi)
		default:
			more = true
		}
	}
	if !found {
		return stripeInvalid("page", "The page cursor is not one this search returned.")
	}
	out := map[string]any{"object": "search_result", "url": "/v1/payment_intents/search", "has_more": more, "data": page, "next_page": nil}
	if more {
		out["next_page"] = page[len(page)-1].ID
	}
	if slices.Contains(expands(q), "total_count") {
		out["total_count"] = total
	}
	return emulation.JSON(http.StatusOK, out)
}

// maxClauses is how many clauses a Stripe search query may have.
const maxClauses = 10

// searchClause is one clause of a search query.
type searchClause struct {
	negated bool
	field   string // amount, created, currency, customer, status, metadata
	key     string // metadata's key
	op      string // ":", ">", "<", ">=", "<="
	value   string
	null    bool // metadata['key']:null
}

// parseSearch reads a search query over PaymentIntents into the test
// it states.
func parseSearch(query string) (func(*stripeIntent) bool, error) {
	var clauses []searchClause
	joiner := "" // AND or OR, once one is written
	rest := strings.TrimSpace(query)
	for rest != "" {
		if len(clauses) > 0 {
			if word, after, ok := strings.Cut(rest, " "); ok && (strings.EqualFold(word, "AND") || strings.EqualFold(word, "OR")) {
				word = strings.ToUpper(word)
				if joiner != "" && joiner != word {
					return nil, fmt.Errorf("AND and OR cannot be combined in one query")
				}
				joiner, rest = word, strings.TrimSpace(after)
			}
		}
		c, after, err := parseClause(rest)
		if err != nil {
			return nil, err
		}
		if clauses = append(clauses, c); len(clauses) > maxClauses {
			return nil, fmt.Errorf("a query has at most %d clauses", maxClauses)
		}
		rest = strings.TrimSpace(after)
	}
	if len(clauses) == 0 {
		return nil, fmt.Errorf("the query is empty")
	}
	or := joiner == "OR"
	return func(pi *stripeIntent) bool {
		for _, c := range clauses {
			if c.matches(pi) == or { // OR: one that matches is enough; AND: one that does not is one too many
				return or
			}
		}
		return !or
	}, nil
}

// parseClause reads the clause that s begins with, and returns what
// follows it.
func parseClause(s string) (searchClause, string, error) {
	var c searchClause
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		c.negated, s = true, rest
	}
	end := strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r == '_') })
	if end < 0 {
		return c, "", fmt.Errorf("%q has no operator", s)
	}
	c.field, s = s[:end], s[end:]
	switch c.field {
	case "metadata":
		if !strings.HasPrefix(s, "[") {
			return c, "", fmt.Errorf("metadata is searched as metadata['key']")
		}
		key, rest, err := quoted(s[1:])
		if err != nil || !strings.HasPrefix(rest, "]") {
			return c, "", fmt.Errorf("metadata is searched as metadata['key']")
		}
		c.key, s = key, rest[1:]
	case "amount", "created", "currency", "customer", "status":
	default:
		return c, "", fmt.Errorf("%q is not a query field of PaymentIntents (amount, created, currency, customer, metadata, status)", c.field)
	}
	for _, op := range []string{">=", "<=", ":", ">", "<"} {
		if rest, ok := strings.CutPrefix(s, op); ok {
			c.op, s = op, rest
			break
		}
	}
	numeric := c.field == "amount" || c.field == "created"
	switch {
	case c.op == "" && numeric:
		return c, "", fmt.Errorf("%s needs an operator: :, >, <, >= or <=", c.field)
	case c.op == "":
		return c, "", fmt.Errorf("%s needs an operator: :", c.field)
	case c.op != ":" && !numeric:
		return c, "", fmt.Errorf("%s is matched exactly, with :", c.field)
	}
	if strings.HasPrefix(s, "'") || strings.HasPrefix(s, `"`) {
		v, rest, err := quoted(s)
		if err != nil {
			return c, "", err
		}
		c.value, s = v, rest
	} else {
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		c.value, s = s[:end], s[end:]
		c.null = c.value == "null" && c.field == "metadata"
	}
	if _, err := strconv.ParseInt(c.value, 10, 64); numeric && err != nil {
		return c, "", fmt.Errorf("%s is a number: %q", c.field, c.value)
	}
	if s != "" && s[0] != ' ' {
		return c, "", fmt.Errorf("a clause ends at %q", s)
	}
	return c, s, nil
}

// quoted reads the quoted string s begins with — in ' or ", a quote
// inside escaped with \ — and returns what follows it.
func quoted(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", "", fmt.Errorf("%q: a value in quotes was expected", s)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case s[0]:
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", fmt.Errorf("%q: the quote is not closed", s)
}

// matches says whether pi matches the clause.
func (c searchClause) matches(pi *stripeIntent) bool {
	var field string
	switch c.field {
	case "amount", "created":
		n := pi.Amount
		if c.field == "created" {
			n = pi.Created
		}
		v, _ := strconv.ParseInt(c.value, 10, 64) // parseClause checked it
		ok := map[string]bool{":": n == v, ">": n > v, "<": n < v, ">=": n >= v, "<=": n <= v}[c.op]
		return ok != c.negated
	case "metadata":
		v, has := pi.Metadata[c.key]
		if c.null {
			return !has != c.negated
		}
		field = v
		if !has {
			return c.negated
		}
	case "currency":
		field = pi.Currency
	case "status":
		field = pi.Status
	case "customer":
		if pi.Customer != nil {
			field = *pi.Customer
		}
	}
	return strings.EqualFold(field, c.value) != c.negated
}
