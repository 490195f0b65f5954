// Package idempotency gives client requests Idempotency-Key semantics
// (draft-ietf-httpapi-idempotency-key-header): the first request with a
// key runs and its response is stored in the same transaction as its
// effect; the same key with the same request gets that response again; the
// same key with another request is refused; and a key whose first request
// is still running answers "in progress".
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// MaxKeyLength is the longest key accepted.
const MaxKeyLength = 255

// MinLockTimeout is the shortest time a claimed key stays locked.
const MinLockTimeout = time.Minute

// Response is a stored response: its status and body.
type Response struct {
	Code     int
	Body     []byte
	Replayed bool // true when this is a stored response sent again
}

// Keys stores idempotency keys in api_idempotency_keys.
type Keys struct {
	db          *gorm.DB
	now         func() time.Time
	lockTimeout time.Duration
}

// New returns a key store. requestTimeout is the longest a request may
// run: a claimed key without a response may be taken over by another
// request only after twice that (at least MinLockTimeout), when the first
// owner has certainly given up — its effect and its response commit
// together, or not at all.
func New(db *gorm.DB, now func() time.Time, requestTimeout time.Duration) *Keys {
	return &Keys{db: db, now: now, lockTimeout: max(2*requestTimeout, MinLockTimeout)}
}

// MinKeyLength is the shortest key accepted. A key is a capability:
// whoever sends it again with the same body gets the stored answer — an
// order's answer names the order (and carries its access token for the
// client that made it, who may share an address with others). So keys
// must be hard to guess: random, as the shop's forms and the docs make
// them (a UUID has 36 characters), never a word such as
// "my-first-order".
const MinKeyLength = 16

// ParseKey checks an Idempotency-Key header value: 16–255 printable
// ASCII characters. The header is a structured-field string, so
// surrounding double quotes are accepted and removed.
func ParseKey(header string) (string, error) {
	key := header
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if strings.TrimSpace(key) == "" {
		return "", models.Errorf(models.EIdempotencyMissing, "the Idempotency-Key header is required")
	}
	if len(key) > MaxKeyLength {
		return "", models.Errorf(models.EIdempotencyInvalid, "the Idempotency-Key header is longer than %d characters", MaxKeyLength)
	}
	for _, c := range []byte(key) {
		if c < 0x20 || c > 0x7e {
			return "", models.Errorf(models.EIdempotencyInvalid, "the Idempotency-Key header must be printable ASCII")
		}
	}
	if len(key) < MinKeyLength {
		return "", models.Errorf(models.EIdempotencyTooShort, "the Idempotency-Key must be at least %d characters, and random "+
			"(a UUID will do): whoever sends a key again with the same body gets its answer", MinKeyLength)
	}
	return key, nil
}

// Do runs fn at most once for (scope, key). requestHash fingerprints the
// request; a different request under the same key is refused with
// EIdempotencyReused. fn runs inside a transaction that also stores its
// response, so the response exists exactly when the effect does. If fn
// returns an error, nothing is stored and the key is freed, so the client
// may retry: use that for failures a retry may fix, and return a Response
// for outcomes that belong to the request (a 409, a 422).
func (k *Keys) Do(ctx context.Context, scope, key, requestHash string, fn func(tx *gorm.DB) (Response, error)) (Response, error) {
	lockedAt, stored, err := k.claim(ctx, scope, key, requestHash)
	if err != nil || stored != nil {
		return deref(stored), err
	}
	var resp Response
	err = store.Transaction(ctx, k.db, func(tx *gorm.DB) error {
		var err error
		if resp, err = fn(tx); err != nil {
			return err
		}
		body := string(resp.Body)
		res := tx.Model(&models.APIIdempotencyKey{}).
			Where("scope = ? AND key = ? AND locked_at = ?", scope, key, lockedAt).
			Updates(map[string]any{"response_code": resp.Code, "response_body": body, "locked_at": nil})
		if res.Error == nil && res.RowsAffected != 1 {
			return models.Errorf(models.ERequestInProgress, "another request took over this Idempotency-Key")
		}
		return res.Error
	})
	if err != nil {
		k.release(scope, key, lockedAt)
		return Response{}, err
	}
	return resp, nil
}

// Once is one request under an Idempotency-Key, bound to the key store:
// the web layer, which reads the key, hands it to a service method
// (orders.Service.CreateOnce, …), which runs its effect through Do in a
// transaction of its own making.
type Once struct {
	keys                    *Keys
	scope, key, requestHash string
}

// Once binds the request with key and requestHash in scope.
func (k *Keys) Once(scope, key, requestHash string) Once {
	return Once{keys: k, scope: scope, key: key, requestHash: requestHash}
}

// Do is Keys.Do for this request.
func (o Once) Do(ctx context.Context, fn func(tx *gorm.DB) (Response, error)) (Response, error) {
	return o.keys.Do(ctx, o.scope, o.key, o.requestHash, fn)
}

// Answer turns what an effect returned — its result, or its error — into
// the response stored with it, or an error that stores nothing (a failure
// a retry may fix). The caller that speaks HTTP provides it.
type Answer[T any] func(result T, err error) (Response, error)

// claim takes the key for this request, or returns the stored response, or
// an error saying why neither is possible.
func (k *Keys) claim(ctx context.Context, scope, key, requestHash string) (time.Time, *Response, error) {
	db := k.db.WithContext(ctx)
	for range 3 {
		now := k.now().UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds
		row := models.APIIdempotencyKey{Scope: scope, Key: key, RequestHash: requestHash, LockedAt: &now, CreatedAt: now}
		res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return time.Time{}, nil, store.Classify(res.Error)
		}
		if res.RowsAffected == 1 {
			return now, nil, nil
		}
		// The key exists: a concurrent first request has committed its claim.
		var old models.APIIdempotencyKey
		err := db.Take(&old, "scope = ? AND key = ?", scope, key).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			continue // freed between our insert and our read: claim again
		}
		if err != nil {
			return time.Time{}, nil, store.Classify(err)
		}
		switch {
		case old.RequestHash != requestHash:
			return time.Time{}, nil, models.Errorf(models.EIdempotencyReused, "this Idempotency-Key was used with a different request")
		case old.ResponseCode != nil:
			return time.Time{}, &Response{Code: *old.ResponseCode, Body: []byte(deref(old.ResponseBody)), Replayed: true}, nil
		case old.LockedAt != nil && now.Sub(*old.LockedAt) > k.lockTimeout:
			// The first request died without an answer; take the key over.
			res := db.Model(&models.APIIdempotencyKey{}).
				Where("id = ? AND response_code IS NULL AND locked_at = ?", old.ID, *old.LockedAt).
				Update("locked_at", now)
			if res.Error != nil {
				return time.Time{}, nil, store.Classify(res.Error)
			}
			if res.RowsAffected == 1 {
				return now, nil, nil
			}
		}
		return time.Time{}, nil, models.Errorf(models.ERequestInProgress, "a request with this Idempotency-Key is still in progress")
	}
	return time.Time{}, nil, models.Errorf(models.ERequestInProgress, "a request with this Idempotency-Key is still in progress")
}

// release frees a claimed key after a failure, so a retry may run. If the
// database is unreachable the key stays locked until LockTimeout passes.
func (k *Keys) release(scope, key string, lockedAt time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k.db.WithContext(ctx).
		Where("scope = ? AND key = ? AND locked_at = ? AND response_code IS NULL", scope, key, lockedAt).
		Delete(&models.APIIdempotencyKey{})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// String makes a Response readable in test failures.
func (r Response) String() string { return fmt.Sprintf("%d %s", r.Code, r.Body) }
