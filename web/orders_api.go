package web

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// Idempotency scopes: one per endpoint that accepts an Idempotency-Key.
const scopeOrdersCreate = "orders.create"

// orderJSON is the order as the API shows it.
type orderJSON struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"`
	CustomerEmail string     `json:"customer_email"`
	Currency      string     `json:"currency"`
	TotalAmount   int64      `json:"total_amount"`
	ExpiresAt     time.Time  `json:"expires_at"`
	PaidAt        *time.Time `json:"paid_at"`
	// Its items and invoice show as on the console's order page.
	Items    []views.ItemRow   `json:"items"`
	Payments []paymentJSON     `json:"payments"`
	Invoice  *views.InvoiceRow `json:"invoice"`
	// AccessToken is in the answer to the order's creation only, and in
	// its replays to the same client (placeOrder): the customer's
	// credential to read and cancel the order. The stored answer never
	// holds it, and another client's replay shows none of the order.
	AccessToken string `json:"access_token,omitempty"`
}

type paymentJSON struct {
	Provider          string    `json:"provider"`
	ProviderReference string    `json:"provider_reference"`
	Amount            int64     `json:"amount"`
	Currency          string    `json:"currency"`
	Status            string    `json:"status"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

func newOrderJSON(o *models.Order) orderJSON {
	v := orderJSON{
		ID: o.ID, Status: string(o.Status), CustomerEmail: o.CustomerEmail, Currency: o.Currency,
		TotalAmount: o.TotalAmount, ExpiresAt: o.ExpiresAt.UTC(), PaidAt: utc(o.PaidAt),
		Items: rows(o.Items, itemRow), Invoice: invoiceRow(o.Invoice), Payments: []paymentJSON{},
	}
	for _, p := range o.Payments {
		v.Payments = append(v.Payments, paymentJSON{
			Provider: p.Provider, ProviderReference: p.ProviderReference, Amount: p.Amount,
			Currency: p.Currency, Status: string(p.Status), CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
		})
	}
	return v
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// createOrder is POST /api/orders, idempotent under the Idempotency-Key
// header: the order and the stored response commit together.
func (s *Server) createOrder(c echo.Context) error {
	return runIdempotent(s, c, scopeOrdersCreate, "", orders.CreateRequest.Validate,
		func(once idempotency.Once, req orders.CreateRequest) (idempotency.Response, error) {
			req.Client = s.client(c)
			return s.placeOrder(c.Request().Context(), once, req)
		})
}

// placeOrder creates req's order under once — the API's and the shop's
// orders alike — and answers with its access token. The answer is
// stored without the token. A replay (the same key and body) shows the
// order again to the client that made it, with its token derived again
// (orders.Service.ReplayFor); to anyone else — who may have learnt or
// guessed the key — it is the same 201 with the order's id only
// (orderIDJSON): never the customer's email, the total, the status or
// the items.
func (s *Server) placeOrder(ctx context.Context, once idempotency.Once, req orders.CreateRequest) (idempotency.Response, error) {
	var token string // the new order's, from inside the transaction
	resp, err := s.deps.Orders.CreateOnce(ctx, once, req, answerJSON(http.StatusCreated, func(o *models.Order) orderJSON {
		token = o.AccessToken
		return newOrderJSON(o)
	}))
	if err != nil || resp.Code != http.StatusCreated {
		return resp, err
	}
	var v orderJSON
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return resp, fmt.Errorf("web: a stored order answer: %w", err)
	}
	if resp.Replayed {
		r, err := s.deps.Orders.ReplayFor(ctx, v.ID, req.Client)
		if err != nil {
			return resp, err
		}
		if !r.Own {
			resp.Body, err = json.Marshal(orderIDJSON{ID: v.ID})
			return resp, err
		}
		token = r.Token
	}
	// Also drops a token from an answer stored before tokens were left
	// out (migration 00020 removed those).
	v.AccessToken = token
	resp.Body, err = json.Marshal(v)
	return resp, err
}

// orderIDJSON is a replayed creation as another client sees it: the
// order exists, and under which id — which opens nothing without the
// token (openOrder) — and nothing the customer told the shop.
type orderIDJSON struct {
	ID string `json:"id"`
}

// runIdempotent is every JSON endpoint under an Idempotency-Key: read the
// key from its header and the JSON body, decode and check the request,
// fingerprint it (with target, what the URL names), and run the service
// call with the request bound to its key: the service stores the answer
// in the transaction of its effect. A stored response is sent again as it
// was.
func runIdempotent[T any](s *Server, c echo.Context, scope, target string, check func(T) error,
	run func(once idempotency.Once, req T) (idempotency.Response, error)) error {
	key, err := idempotencyKey(c.Request().Header)
	if err != nil {
		return err
	}
	body, err := readJSONBody(c)
	if err != nil {
		return err
	}
	var req T
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if check != nil {
		if err := check(req); err != nil {
			return err
		}
	}
	fingerprint, err := canonjson.Fingerprint(body)
	if err != nil {
		return models.Errorf(models.EInvalidPayload, "the body is not valid JSON")
	}
	resp, err := run(s.deps.Keys.Once(scope, key, canonjson.Hash([]byte(target+"\n"+fingerprint))), req)
	if err != nil {
		return err
	}
	return writeStored(c, resp)
}

// idempotencyKey reads the Idempotency-Key header. Two of them are
// refused: which one counts would be a guess.
func idempotencyKey(h http.Header) (string, error) {
	if n := len(h.Values("Idempotency-Key")); n > 1 {
		return "", models.Errorf(models.EIdempotencyInvalid, "send one Idempotency-Key header, not %d", n)
	}
	return idempotency.ParseKey(h.Get("Idempotency-Key"))
}

// answerJSON is how a service call under an Idempotency-Key is answered
// — whether the key came in a header (the JSON API) or a hidden form
// field (the console's and the shop's forms): its result as JSON with
// status, or its own failure (a 4xx) as a problem, either stored with its
// effect in one transaction; a failure a retry may fix stays an error and
// stores nothing.
func answerJSON[T, V any](status int, view func(T) V) idempotency.Answer[T] {
	return func(result T, err error) (idempotency.Response, error) {
		if err != nil {
			return storedProblem(err)
		}
		b, err := json.Marshal(view(result))
		return idempotency.Response{Code: status, Body: b}, err
	}
}

// writeStored sends a response stored under an Idempotency-Key, saying
// whether it is a replay.
func writeStored(c echo.Context, resp idempotency.Response) error {
	if resp.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	contentType := echo.MIMEApplicationJSON
	if resp.Code >= 400 {
		contentType = problemContentType
	}
	return c.Blob(resp.Code, contentType, resp.Body)
}

// storedProblem turns a request's own failure (a 4xx) into a response to
// store under its idempotency key; a failure a retry may fix stays an
// error, so nothing is stored and the client may try again.
func storedProblem(err error) (idempotency.Response, error) {
	p := problemOf(err)
	if p.Status >= 500 {
		return idempotency.Response{}, err
	}
	b, merr := json.Marshal(p)
	return idempotency.Response{Code: p.Status, Body: b}, merr
}

// openOrder is the order a request names, if it shows the order's access
// token — in Authorization: Bearer, or as ?t= for a link in an email — or
// the admin token, in the Authorization header only: a URL ends up in
// logs, histories and proxies, and the admin token opens every order.
// Anything else is the 404 of an order that does not exist: the id alone
// opens nothing.
func (s *Server) openOrder(c echo.Context) (*models.Order, error) {
	bearer, _ := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
	admin := bearer != "" && s.cfg.AdminAPIToken != "" && subtle.ConstantTimeCompare([]byte(bearer), []byte(s.cfg.AdminAPIToken)) == 1
	token := bearer
	if token == "" {
		token = c.QueryParam("t")
	}
	return s.deps.Orders.Open(c.Request().Context(), c.Param("id"), token, admin)
}

// getOrder is GET /api/orders/:id, with the order's access token.
func (s *Server) getOrder(c echo.Context) error {
	o, err := s.openOrder(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newOrderJSON(o))
}

// cancelOrder is POST /api/orders/:id/cancel, with the order's access
// token.
func (s *Server) cancelOrder(c echo.Context) error {
	ctx := c.Request().Context()
	if _, err := s.openOrder(c); err != nil {
		return err
	}
	if _, err := s.deps.Orders.Cancel(ctx, c.Param("id"), models.CauseCustomer); err != nil {
		return err
	}
	o, err := s.deps.Orders.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newOrderJSON(o))
}

// readJSONBody checks the content type and reads the (size-limited) body.
func readJSONBody(c echo.Context) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationJSON {
		return nil, models.Errorf(models.EUnsupportedMediaType, "Content-Type must be application/json")
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, models.Errorf(models.EInvalidPayload, "could not read the body")
	}
	return body, nil
}

// kindWords names what a JSON value must be for a field of type t, in
// the words of docs/api.md: "a whole number", not "a int64".
func kindWords(t reflect.Type) string {
	if t == reflect.TypeFor[json.Number]() {
		return "a number"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, such as 2 (no fraction, no exponent, no quotes)"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return kindWords(t.Elem())
	}
	return "of another type"
}

// decodeStrict decodes a JSON object into v: malformed JSON is a 400, a
// field of the wrong type or an unknown field is a 422.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
		if dec.More() {
			return models.Errorf(models.EInvalidPayload, "the body holds more than one JSON value")
		}
		return nil
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "the body"
		}
		return models.Errorf(models.EInvalid, "%s must be %s", field, kindWords(typeErr.Type))
	case errors.As(err, &syntaxErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return models.Errorf(models.EInvalidPayload, "the body is not valid JSON")
	default:
		return models.Errorf(models.EInvalid, "%v", err) // unknown field "x"
	}
}
