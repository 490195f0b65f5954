// Package orders creates orders with an all-or-nothing stock reservation,
// reads them, and moves them out of pending by cancel or expiry. Its stock
// functions (Reserve, Release) are the only code that changes
// products.stock for an order, and each change is guarded by a unique
// stock_movements row so it happens at most once.
package orders

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Limits on one order: a single request cannot lock the whole catalogue,
// and (with models.MaxQty, MaxPrice and MaxTotal) no total can overflow.
const (
	MaxItems = 100
	// DefaultMaxUnits is the default of Service.MaxUnits (ORDER_MAX_UNITS).
	DefaultMaxUnits = 100
)

// Service is the orders capability.
type Service struct {
	db    *gorm.DB
	log   *slog.Logger
	now   func() time.Time
	ttl   time.Duration
	tasks Tasks

	// MaxUnits caps the units of all items of one order, so that one
	// buyer cannot hold a product's whole stock while not paying
	// (ORDER_MAX_UNITS).
	MaxUnits int64
	// OpenPerClient caps the unpaid orders one client may hold at once
	// (OPEN_ORDERS_PER_CLIENT); 0: no cap.
	OpenPerClient int
	// TokenKey is the key access tokens are derived from
	// (ORDER_TOKEN_SECRET, the same in every web process). NewService
	// sets a random key of this process's own, for tests: the tokens it
	// derives open their orders anywhere (their hash is stored), but
	// another process cannot derive them again for a replay.
	TokenKey []byte
}

// Tasks makes the outbox rows of the tasks an order's own changes cause:
// the task that expires it at its expires_at, and what its end causes
// (EndTasks); jobs.Tasks in the app (this package does not know the
// queue).
type Tasks interface {
	Expire(orderID string, expiresAt time.Time) models.OutboxMessage
	EndTasks
}

// EndTasks makes the outbox rows of what a pending order that ends in
// status causes — the email that tells its customer — for EndTx, which
// every way of ending one goes through.
type EndTasks interface {
	Ended(orderID string, status models.OrderStatus, now time.Time) []models.OutboxMessage
}

// NewService returns the orders service. now is the clock; ttl is how long
// a pending order holds its stock; tasks writes its expiry.
func NewService(db *gorm.DB, log *slog.Logger, now func() time.Time, ttl time.Duration, tasks Tasks) *Service {
	key := make([]byte, 32)
	rand.Read(key)
	return &Service{db: db, log: log, now: now, ttl: ttl, tasks: tasks, MaxUnits: DefaultMaxUnits, TokenKey: key}
}

// CreateRequest is the body of POST /api/orders.
type CreateRequest struct {
	CustomerEmail string        `json:"customer_email"`
	Items         []ItemRequest `json:"items"`
	// Client is who is asking, set by the web layer (not part of the
	// body): the client identity of its address (an IPv4 address, an
	// IPv6 /64; web.ClientIdentity), or a fork's customer account. Its
	// unpaid orders are counted, and it is kept as orders.client_addr.
	Client string `json:"-"`
}

// ItemRequest is one line of a CreateRequest.
type ItemRequest struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// Validate checks what can be checked without the database.
func (r CreateRequest) Validate() error {
	if err := models.CheckCustomerEmail(r.CustomerEmail); err != nil {
		return err
	}
	if len(r.Items) == 0 {
		return models.Errorf(models.EInvalid, "items must list at least one item")
	}
	if len(r.Items) > MaxItems {
		return models.Errorf(models.EInvalid, "items may list at most %d items", MaxItems)
	}
	seen := make(map[string]bool, len(r.Items))
	for i, it := range r.Items {
		switch {
		case strings.TrimSpace(it.SKU) == "":
			return models.Errorf(models.EInvalid, "items[%d].sku is empty", i)
		case !models.CleanText(it.SKU) || len(it.SKU) > 255:
			return models.Errorf(models.EInvalid, "items[%d].sku must be at most 255 characters of text without NUL", i)
		case it.Qty < 1 || it.Qty > models.MaxQty:
			return models.Errorf(models.EInvalid, "items[%d].qty must be between 1 and %d", i, models.MaxQty)
		case seen[it.SKU]:
			return models.Errorf(models.EInvalid, "items[%d]: sku %s is listed twice", i, it.SKU)
		}
		seen[it.SKU] = true
	}
	return nil
}

// Create creates an order and reserves its stock, in one transaction.
func (s *Service) Create(ctx context.Context, req CreateRequest) (*models.Order, error) {
	var o *models.Order
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		o, err = s.CreateTx(tx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("orders.Create: %w", err)
	}
	return o, nil
}

// CreateOnce is Create under an Idempotency-Key: the order and the answer
// made of it (or of its refusal) commit together, so the same request
// again gets the same answer and never a second order.
func (s *Service) CreateOnce(ctx context.Context, once idempotency.Once, req CreateRequest, answer idempotency.Answer[*models.Order]) (idempotency.Response, error) {
	return once.Do(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
		return answer(s.CreateTx(tx, req))
	})
}

// CreateTx is Create inside the caller's transaction (which, for example,
// also stores the response under a client's idempotency key). It runs in a
// savepoint: when it fails, nothing it wrote remains.
func (s *Service) CreateTx(tx *gorm.DB, req CreateRequest) (*models.Order, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var units int64
	for _, it := range req.Items {
		units += it.Qty // at most MaxItems × MaxQty: no overflow
	}
	if units > s.MaxUnits {
		return nil, models.Errorf(models.EInvalid, "an order may hold at most %d units in all; this one has %d", s.MaxUnits, units)
	}
	items := slices.Clone(req.Items)
	slices.SortFunc(items, func(a, b ItemRequest) int { return strings.Compare(a.SKU, b.SKU) })
	skus := make([]string, len(items))
	for i, it := range items {
		skus[i] = it.SKU
	}

	now := s.now().UTC().Truncate(time.Microsecond) // as PostgreSQL stores it
	id, nonce := models.NewOrderID(now), rand.Text()
	token := AccessToken(s.TokenKey, id, nonce)
	o := &models.Order{
		ClientAddr:       models.Truncate(req.Client, 255),
		ID:               id,
		CustomerEmail:    req.CustomerEmail,
		Status:           models.OrderPending,
		ExpiresAt:        now.Add(s.ttl),
		CreatedAt:        now,
		UpdatedAt:        now,
		AccessToken:      token,
		AccessTokenHash:  HashAccessToken(token),
		AccessTokenNonce: nonce,
	}
	err := tx.Transaction(func(tx *gorm.DB) error {
		if err := s.checkOpenOrders(tx, o.ClientAddr, now); err != nil {
			return err
		}
		var products []models.Product
		if err := tx.Where("sku IN ?", skus).Find(&products).Error; err != nil {
			return err
		}
		if len(products) != len(skus) {
			return models.Errorf(models.EInvalid, "unknown sku: %s", missing(skus, products))
		}
		// By SKU, not by position: the database sorts by its collation,
		// which need not be Go's byte order.
		bySKU := make(map[string]models.Product, len(products))
		for _, p := range products {
			bySKU[p.SKU] = p
		}
		o.Currency = bySKU[items[0].SKU].Currency
		for i := range items {
			p := bySKU[items[i].SKU]
			if p.Currency != o.Currency {
				return models.Errorf(models.EInvalid, "items are priced in different currencies (%s, %s)", o.Currency, p.Currency)
			}
			if p.Price < 0 || p.Price > models.MaxPrice {
				return models.Errorf(models.EInvalid, "product %s has a price beyond %d and cannot be ordered", p.SKU, int64(models.MaxPrice))
			}
			if p.MaxPerOrder != nil && items[i].Qty > *p.MaxPerOrder {
				return models.Errorf(models.EInvalid, "at most %d of %s per order", *p.MaxPerOrder, p.Name)
			}
			o.Items = append(o.Items, models.OrderItem{OrderID: o.ID, SKU: p.SKU, Name: p.Name, Qty: items[i].Qty, UnitPrice: p.Price})
			// price ≤ MaxPrice and qty ≤ MaxQty: the product fits in int64,
			// and so does the sum, checked against MaxTotal at each step.
			o.TotalAmount += p.Price * items[i].Qty
			if o.TotalAmount > models.MaxTotal {
				return models.Errorf(models.EInvalid, "the order's total would exceed %d", int64(models.MaxTotal))
			}
		}
		if err := tx.Omit("Items", "Payments", "Invoice").Create(o).Error; err != nil {
			return err
		}
		if err := tx.Create(&o.Items).Error; err != nil {
			return err
		}
		if _, err := Reserve(tx, o.ID, o.Items, models.MovementReserve); err != nil {
			return err
		}
		return outbox.Add(tx, s.tasks.Expire(o.ID, o.ExpiresAt))
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// checkOpenOrders refuses an order from a client that already holds
// OpenPerClient unpaid orders that have not expired. It counts under an
// advisory lock of the client, taken in the order's
// transaction, so that orders sent at once from one client are counted
// one after the other and the cap holds exactly.
func (s *Service) checkOpenOrders(tx *gorm.DB, client string, now time.Time) error {
	if s.OpenPerClient <= 0 || client == "" {
		return nil
	}
	if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", "open orders:"+client).Error; err != nil {
		return err
	}
	var open int64
	err := tx.Model(&models.Order{}).Where("client_addr = ? AND status = ? AND expires_at > ?", client, models.OrderPending, now).
		Count(&open).Error
	if err != nil {
		return err
	}
	if open >= int64(s.OpenPerClient) {
		return models.Errorf(models.ETooManyRequests,
			"you have %d unpaid orders; pay or cancel one, or wait until one expires, before ordering again", open)
	}
	return nil
}

func missing(skus []string, found []models.Product) string {
	have := make(map[string]bool, len(found))
	for _, p := range found {
		have[p.SKU] = true
	}
	var out []string
	for _, s := range skus {
		if !have[s] {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// AccessToken is the access token of order id with nonce (random per
// order, kept in orders.access_token_nonce) under key
// (ORDER_TOKEN_SECRET): the first 192 bits of HMAC-SHA256(key, label ‖
// id ‖ nonce), base64url. Derived rather than drawn, so that a replay of
// the order's creation can show it again while no copy of it is kept —
// not in the order, not in the stored answer. Deriving it takes the
// secret and the database's nonce: neither alone (an order id is no
// secret). Orders made before tokens were derived keep their random
// ones; only the hash is ever compared.
func AccessToken(key []byte, id, nonce string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("order access token\x00" + id + "\x00" + nonce))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:24])
}

// HashAccessToken is what is stored of a token. A token has 192 bits
// that cannot be guessed, so one SHA-256 is enough: there is nothing to
// guess slowly.
func HashAccessToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenOpens reports whether token is o's access token, in constant time.
// An order without a token hash (from before tokens existed) opens with
// no token: only the admin sees it.
func TokenOpens(o *models.Order, token string) bool {
	if o.AccessTokenHash == "" || token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashAccessToken(token)), []byte(o.AccessTokenHash)) == 1
}

// Replay is what a replay of an order's creation under its
// Idempotency-Key may show the client that sends it (ReplayFor).
type Replay struct {
	// Own says the client is the one that made the order: it may see
	// the order again. Anyone else who sends the same key and body
	// learns no more than the order's id.
	Own bool
	// Token is the order's access token, derived again: for its own
	// client only, and only when it is the token whose hash the order
	// keeps — not for an order made before tokens were derived (no
	// nonce), or under another ORDER_TOKEN_SECRET.
	Token string
}

// ReplayFor is what a replay of order id's creation shows to client:
// the order and its token to the client that made it (orders.client_addr;
// the web layer's client identity), nothing of it to anyone else. A
// client that is not known — none given, an order kept without one
// (made before client_addr), an order that is gone — is anyone else.
func (s *Service) ReplayFor(ctx context.Context, id, client string) (Replay, error) {
	client = models.Truncate(client, 255) // as CreateTx keeps it
	if client == "" || !models.ValidOrderID(id) {
		return Replay{}, nil
	}
	var o models.Order
	err := s.db.WithContext(ctx).Select("id", "access_token_hash", "access_token_nonce", "client_addr").Take(&o, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Replay{}, nil
	}
	if err != nil {
		return Replay{}, fmt.Errorf("orders.ReplayFor: %w", store.Classify(err))
	}
	if o.ClientAddr != client {
		return Replay{}, nil
	}
	r := Replay{Own: true}
	if o.AccessTokenNonce != "" {
		if token := AccessToken(s.TokenKey, id, o.AccessTokenNonce); TokenOpens(&o, token) {
			r.Token = token
		}
	}
	return r, nil
}

// Open returns the order when token is its access token (or admin is
// true: the caller showed the admin token), else ENotFound — the same
// answer, after the same one query, as for an order that does not exist,
// so a stranger learns nothing from trying ids.
func (s *Service) Open(ctx context.Context, id, token string, admin bool) (*models.Order, error) {
	if !models.ValidOrderID(id) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	var o models.Order
	err := s.db.WithContext(ctx).Select("id", "access_token_hash").Take(&o, "id = ?", id).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("orders.Open: %w", store.Classify(err))
	}
	if err != nil || !(admin || TokenOpens(&o, token)) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	return s.Get(ctx, id)
}

// Get returns the order with its items and payments.
func (s *Service) Get(ctx context.Context, id string) (*models.Order, error) {
	if !models.ValidOrderID(id) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	var o models.Order
	err := s.db.WithContext(ctx).
		Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("sku") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Preload("Invoice").
		Take(&o, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("orders.Get: %w", store.Classify(err))
	}
	return &o, nil
}

// Cancel moves a pending order to cancelled, releases its stock and
// writes the email that tells its customer (EndTx). Cancelling a
// cancelled order succeeds again, and writes nothing; any other state is
// an invalid transition. cause says who cancelled (models.CauseCustomer,
// models.CauseAdmin).
func (s *Service) Cancel(ctx context.Context, id, cause string) (*models.Order, error) {
	if !models.ValidOrderID(id) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	var o *models.Order
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		if o, err = Lock(tx, id); err != nil {
			return err
		}
		switch o.Status {
		case models.OrderCancelled:
			return nil
		case models.OrderPending:
			return s.end(tx, o, models.OrderCancelled, cause)
		default:
			return models.Errorf(models.EInvalidTransition, "order %s is %s and can no longer be cancelled", id, o.Status)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("orders.Cancel: %w", err)
	}
	s.log.InfoContext(ctx, "order cancelled", "order_id", id, "status_after", o.Status)
	return o, nil
}

// Expire moves a pending order to expired, releases its stock and writes
// the email that tells its customer, as an expired payment event would.
// Any other state is left alone: expired reports whether the order
// changed. The expiry sweep calls it.
func (s *Service) Expire(ctx context.Context, id string) (expired bool, err error) {
	err = store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		expired, err = s.expire(tx, id, models.CauseExpirySweep)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("orders.Expire: %w", err)
	}
	return expired, nil
}

// ExpireTx is Expire inside the caller's transaction (the order:expire
// job's, which also marks the job done).
func (s *Service) ExpireTx(tx *gorm.DB, id string) (bool, error) {
	return s.expire(tx, id, models.CauseExpiryJob)
}

func (s *Service) expire(tx *gorm.DB, id, cause string) (bool, error) {
	o, err := Lock(tx, id)
	if err != nil || o.Status != models.OrderPending {
		return false, err
	}
	return true, s.end(tx, o, models.OrderExpired, cause)
}

func (s *Service) end(tx *gorm.DB, o *models.Order, to models.OrderStatus, cause string) error {
	return EndTx(tx, s.tasks, o, to, s.now(), Cause{What: cause})
}

// EndTx moves the locked pending order o to a state that holds no stock
// (cancelled, expired, failed), gives its stock back and writes what
// that causes (tasks: the customer's email), in the caller's
// transaction. Every way a pending order ends goes through here: a
// cancel, the expiry job and sweep, a failed or expired payment event.
// An order ends once (it leaves pending for good), so its email task is
// written once, and the outbox's unique task id is the last guard.
func EndTx(tx *gorm.DB, tasks EndTasks, o *models.Order, to models.OrderStatus, now time.Time, cause Cause) error {
	if to.HoldsStock() {
		return fmt.Errorf("orders.EndTx %s: %s holds stock; an order that ends gives it back", o.ID, to)
	}
	if err := Transition(tx, o, to, now, cause, models.OrderPending); err != nil {
		return err
	}
	if err := LoadItems(tx, o); err != nil {
		return err
	}
	if err := Release(tx, o.ID, o.Items); err != nil {
		return err
	}
	return outbox.Add(tx, tasks.Ended(o.ID, to, now)...)
}

// Lock reads the order with SELECT … FOR UPDATE: every change to an order
// starts here, so the order row is always the first lock a transaction
// takes (then products, in SKU order). Its items are not loaded: the
// paths that move stock call LoadItems, the others need one query less.
func Lock(tx *gorm.DB, id string) (*models.Order, error) {
	var o models.Order
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&o, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// LoadItems reads o's items, in SKU order, unless they are loaded.
func LoadItems(tx *gorm.DB, o *models.Order) error {
	if o.Items != nil {
		return nil
	}
	return tx.Where("order_id = ?", o.ID).Order("sku").Find(&o.Items).Error
}

// Cause is why an order changes status: one of the models.Cause… values,
// and the callback that caused it, if one did.
type Cause struct {
	What       string
	CallbackID *int64
}

// Transition moves the locked order o to status `to` with a conditional
// UPDATE that names the states it may leave from, and records the change
// in order_transitions in the same statement. An order in none of them —
// the caller's view was stale — fails the statement, and with it the
// transaction.
func Transition(tx *gorm.DB, o *models.Order, to models.OrderStatus, now time.Time, cause Cause, from ...models.OrderStatus) error {
	m := NewMove(o, to, now, cause, from...)
	rows, err := m.Statement.Exec(tx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == notNullViolation && pgErr.TableName == "order_transitions" {
		return fmt.Errorf("orders.Transition %s: %s is not in %v: %w", o.ID, o.Status, from, err)
	}
	if err != nil {
		return err
	}
	return m.Done(rows)
}

// notNullViolation is PostgreSQL's error code for a NULL in a NOT NULL
// column: transition.sql's when no order moved.
const notNullViolation = "23502"

// transitionSQL records the transition with the id the UPDATE returned:
// when no row moved, that id is NULL, which order_transitions.order_id
// refuses. So the statement cannot succeed without moving the order, and
// a transaction that sends it with COMMIT in one round trip
// (store.Tx.Commit) commits nothing when the order had moved meanwhile.
//
//go:embed sql/transition.sql
var transitionSQL string

// Move is Transition as a statement, for a transaction that sends it with
// others in one round trip (store.Tx): Statement is the transition, Done
// records its outcome on the order.
type Move struct {
	Statement store.Statement
	order     *models.Order
	to        models.OrderStatus
	from      []models.OrderStatus
	now       time.Time
}

// NewMove is the transition of the locked order o to status `to`, from one
// of the states `from`.
func NewMove(o *models.Order, to models.OrderStatus, now time.Time, cause Cause, from ...models.OrderStatus) Move {
	now = now.UTC()
	var paidAt *time.Time
	if to == models.OrderPaid {
		paidAt = &now
	}
	fromText := make([]string, len(from))
	for i, f := range from {
		fromText[i] = string(f)
	}
	return Move{
		Statement: store.Statement{SQL: transitionSQL, Args: []any{
			string(to), now, paidAt, o.ID, fromText, string(o.Status), cause.What, cause.CallbackID}},
		order: o, to: to, from: from, now: now,
	}
}

// Done records the new status on the order once the transition's
// statement has run; it checks that the statement changed one row.
func (m Move) Done(rows int64) error {
	if rows != 1 {
		return fmt.Errorf("orders.Transition %s: %s is not in %v", m.order.ID, m.order.Status, m.from)
	}
	o := m.order
	o.Status, o.UpdatedAt = m.to, m.now
	if m.to == models.OrderPaid {
		o.PaidAt = &m.now
	}
	return nil
}
