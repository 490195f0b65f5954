package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

const (
	scope = "orders.create"
	key   = "0b6f3c2e-5d1a-4f7e-9a3b-2c8d4e6f1a2b"
)

// clock is a clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// createProduct is the effect of a request in these tests: a product row
// written in the request's transaction.
func createProduct(tx *gorm.DB, sku string) error {
	return tx.Create(&models.Product{SKU: sku, Name: sku, Price: 1000, Currency: "IDR", Stock: 1}).Error
}

func countProducts(t *testing.T, db *gorm.DB, sku string) int64 {
	t.Helper()
	var n int64
	if err := db.Model(&models.Product{}).Where("sku = ?", sku).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func keyRows(t *testing.T, db *gorm.DB, scope, key string) []models.APIIdempotencyKey {
	t.Helper()
	var rows []models.APIIdempotencyKey
	if err := db.Find(&rows, "scope = ? AND key = ?", scope, key).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// ParseKey accepts 16 to 255 printable ASCII characters (space included),
// removing one pair of surrounding double quotes, and returns the key
// unchanged otherwise. An empty or blank header is "missing" (400); a key
// longer than 255 characters or with a character outside printable ASCII
// is "invalid" (400), checked before the length floor; a key shorter than
// 16 characters is "too short" (422).
func TestParseKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, header, want, code string
	}{
		{"empty", "", "", models.EIdempotencyMissing},
		{"blank", "     ", "", models.EIdempotencyMissing},
		{"sixteen spaces", strings.Repeat(" ", 16), "", models.EIdempotencyMissing},
		{"empty quoted string", `""`, "", models.EIdempotencyMissing},
		{"quoted blank", `"   "`, "", models.EIdempotencyMissing},
		{"a word", "my-first-order", "", models.EIdempotencyTooShort},
		{"15 characters", strings.Repeat("k", 15), "", models.EIdempotencyTooShort},
		{"15 characters quoted", `"` + strings.Repeat("k", 15) + `"`, "", models.EIdempotencyTooShort},
		{"a lone quote", `"`, "", models.EIdempotencyTooShort},
		{"16 characters", strings.Repeat("k", 16), strings.Repeat("k", 16), ""},
		{"a UUID", key, key, ""},
		{"a quoted UUID", `"` + key + `"`, key, ""},
		{"inner spaces and punctuation", "order 1 of many!?~", "order 1 of many!?~", ""},
		{"an unbalanced quote is kept", `"` + key, `"` + key, ""},
		{"255 characters", strings.Repeat("k", 255), strings.Repeat("k", 255), ""},
		{"255 characters quoted", `"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255), ""},
		{"256 characters", strings.Repeat("k", 256), "", models.EIdempotencyInvalid},
		{"a tab", key + "\t", "", models.EIdempotencyInvalid},
		{"a newline", "abcdefgh\nijklmnopq", "", models.EIdempotencyInvalid},
		{"DEL", key + "\x7f", "", models.EIdempotencyInvalid},
		{"non-ASCII", key + "é", "", models.EIdempotencyInvalid},
		{"short with a control character", "abc\x00def", "", models.EIdempotencyInvalid},
	}
	for _, c := range cases {
		got, err := idempotency.ParseKey(c.header)
		if code := models.ErrorCode(err); code != c.code || got != c.want {
			t.Errorf("%s: ParseKey(%q) = %q, code %q (%v); want %q, code %q", c.name, c.header, got, code, err, c.want, c.code)
		}
	}
}

// The first Do for (scope, key) runs fn and stores its response with its
// effect; a second Do with the same request hash returns that response,
// marked as replayed, without running fn, so the effect exists once. The
// stored row holds the response and is no longer locked.
func TestDoRunsOnceAndReplaysStoredResponse(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	calls := 0
	fn := func(tx *gorm.DB) (idempotency.Response, error) {
		calls++
		if err := createProduct(tx, "SKU-ONCE"); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Code: 201, Body: []byte(`{"sku":"SKU-ONCE"}`)}, nil
	}
	first, err := k.Do(ctx, scope, key, "hash-a", fn)
	if err != nil || first.Code != 201 || string(first.Body) != `{"sku":"SKU-ONCE"}` || first.Replayed {
		t.Fatalf("first Do = %v (replayed %v), %v; want 201 {\"sku\":\"SKU-ONCE\"}, not replayed", first, first.Replayed, err)
	}
	second, err := k.Do(ctx, scope, key, "hash-a", fn)
	if err != nil || second.Code != 201 || string(second.Body) != `{"sku":"SKU-ONCE"}` || !second.Replayed {
		t.Fatalf("second Do = %v (replayed %v), %v; want the stored 201, replayed", second, second.Replayed, err)
	}
	if calls != 1 {
		t.Errorf("fn ran %d times, want 1", calls)
	}
	if n := countProducts(t, db, "SKU-ONCE"); n != 1 {
		t.Errorf("%d products written, want 1", n)
	}
	rows := keyRows(t, db, scope, key)
	if len(rows) != 1 || rows[0].RequestHash != "hash-a" || rows[0].ResponseCode == nil || *rows[0].ResponseCode != 201 ||
		rows[0].ResponseBody == nil || *rows[0].ResponseBody != `{"sku":"SKU-ONCE"}` || rows[0].LockedAt != nil {
		t.Errorf("key rows %+v; want one with hash-a, 201, the body and no lock", rows)
	}
}

// A response fn returns for an outcome of the request (a 409) is stored
// like a success: the same request again gets it back without running fn.
func TestDoStoresRefusalResponses(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	calls := 0
	fn := func(tx *gorm.DB) (idempotency.Response, error) {
		calls++
		return idempotency.Response{Code: 409, Body: []byte(`{"code":"insufficient_stock"}`)}, nil
	}
	for i := range 2 {
		resp, err := k.Do(ctx, scope, key, "hash-a", fn)
		if err != nil || resp.Code != 409 || string(resp.Body) != `{"code":"insufficient_stock"}` || resp.Replayed != (i == 1) {
			t.Fatalf("Do #%d = %v (replayed %v), %v; want the 409, replayed the second time", i+1, resp, resp.Replayed, err)
		}
	}
	if calls != 1 {
		t.Errorf("fn ran %d times, want 1", calls)
	}
}

// The same key with another request hash is refused with
// EIdempotencyReused, without running fn, and the stored response stays.
func TestDoRefusesKeyReusedForAnotherRequest(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	calls := 0
	fn := func(tx *gorm.DB) (idempotency.Response, error) {
		calls++
		return idempotency.Response{Code: 201, Body: []byte(`{"n":1}`)}, nil
	}
	if _, err := k.Do(ctx, scope, key, "hash-a", fn); err != nil {
		t.Fatal(err)
	}
	resp, err := k.Do(ctx, scope, key, "hash-b", fn)
	if models.ErrorCode(err) != models.EIdempotencyReused || resp.Code != 0 {
		t.Fatalf("Do with another hash = %v, %v; want no response and %s", resp, err, models.EIdempotencyReused)
	}
	if calls != 1 {
		t.Errorf("fn ran %d times, want 1", calls)
	}
	if rows := keyRows(t, db, scope, key); len(rows) != 1 || rows[0].RequestHash != "hash-a" || *rows[0].ResponseCode != 201 {
		t.Errorf("key rows %+v; want the first request's only", rows)
	}
}

// When fn fails, Do returns its error, fn's writes in tx are rolled back
// and nothing is kept for the key, so a retry runs fn again and its
// effect then exists once.
func TestDoFailureFreesKeyAndRollsBack(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	errFlaky := errors.New("the payment provider timed out")
	calls := 0
	fn := func(tx *gorm.DB) (idempotency.Response, error) {
		calls++
		if err := createProduct(tx, "SKU-RETRY"); err != nil {
			return idempotency.Response{}, err
		}
		if calls == 1 {
			return idempotency.Response{Code: 201, Body: []byte(`{"lost":true}`)}, errFlaky
		}
		return idempotency.Response{Code: 201, Body: []byte(`{"sku":"SKU-RETRY"}`)}, nil
	}
	resp, err := k.Do(ctx, scope, key, "hash-a", fn)
	if !errors.Is(err, errFlaky) || resp.Code != 0 {
		t.Fatalf("failing Do = %v, %v; want no response and fn's error", resp, err)
	}
	if n := countProducts(t, db, "SKU-RETRY"); n != 0 {
		t.Errorf("%d products after the failure, want 0 (rolled back)", n)
	}
	if rows := keyRows(t, db, scope, key); len(rows) != 0 {
		t.Errorf("key rows after the failure %+v; want none", rows)
	}
	resp, err = k.Do(ctx, scope, key, "hash-a", fn)
	if err != nil || resp.Code != 201 || string(resp.Body) != `{"sku":"SKU-RETRY"}` || resp.Replayed {
		t.Fatalf("retry = %v (replayed %v), %v; want fn's new 201, not replayed", resp, resp.Replayed, err)
	}
	if calls != 2 {
		t.Errorf("fn ran %d times, want 2", calls)
	}
	if n := countProducts(t, db, "SKU-RETRY"); n != 1 {
		t.Errorf("%d products after the retry, want 1", n)
	}
}

// While the first request for a key is still running, the same request
// gets ERequestInProgress and another request under that key
// EIdempotencyReused, neither running its fn; once the first commits, the
// same request gets its stored response.
func TestDoAnswersInProgressWhileFirstRuns(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	var inner atomic.Int32
	innerFn := func(tx *gorm.DB) (idempotency.Response, error) {
		inner.Add(1)
		return idempotency.Response{Code: 201}, nil
	}
	var whileRunning, otherRequest error
	resp, err := k.Do(ctx, scope, key, "hash-a", func(tx *gorm.DB) (idempotency.Response, error) {
		if err := createProduct(tx, "SKU-FIRST"); err != nil {
			return idempotency.Response{}, err
		}
		_, whileRunning = k.Do(ctx, scope, key, "hash-a", innerFn)
		_, otherRequest = k.Do(ctx, scope, key, "hash-b", innerFn)
		return idempotency.Response{Code: 201, Body: []byte(`{"first":true}`)}, nil
	})
	if err != nil || resp.Code != 201 {
		t.Fatalf("first Do = %v, %v", resp, err)
	}
	if models.ErrorCode(whileRunning) != models.ERequestInProgress {
		t.Errorf("the same request while the first runs: %v; want %s", whileRunning, models.ERequestInProgress)
	}
	if models.ErrorCode(otherRequest) != models.EIdempotencyReused {
		t.Errorf("another request while the first runs: %v; want %s", otherRequest, models.EIdempotencyReused)
	}
	if n := inner.Load(); n != 0 {
		t.Errorf("the later requests' fn ran %d times, want 0", n)
	}
	after, err := k.Do(ctx, scope, key, "hash-a", innerFn)
	if err != nil || !after.Replayed || string(after.Body) != `{"first":true}` {
		t.Errorf("after the first committed: %v (replayed %v), %v; want its stored response", after, after.Replayed, err)
	}
	if n := countProducts(t, db, "SKU-FIRST"); n != 1 {
		t.Errorf("%d products, want 1", n)
	}
}

// Twenty requests with one key, started at once: fn runs exactly once;
// every other caller gets either the stored response (replayed) or
// ERequestInProgress, never a second run; the database holds one effect
// and one key row with the response.
func TestDoConcurrentRequestsRunOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	const n = 20
	var calls atomic.Int32
	fn := func(tx *gorm.DB) (idempotency.Response, error) {
		calls.Add(1)
		if err := createProduct(tx, "SKU-RACE"); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Code: 201, Body: []byte(`{"sku":"SKU-RACE"}`)}, nil
	}
	resps := make([]idempotency.Response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = k.Do(ctx, scope, key, "hash-a", fn)
		})
	}
	close(start)
	wg.Wait()

	if c := calls.Load(); c != 1 {
		t.Errorf("fn ran %d times, want 1", c)
	}
	ran, replayed, inProgress := 0, 0, 0
	for i := range n {
		switch {
		case errs[i] == nil && !resps[i].Replayed && resps[i].Code == 201:
			ran++
		case errs[i] == nil && resps[i].Replayed && resps[i].Code == 201 && string(resps[i].Body) == `{"sku":"SKU-RACE"}`:
			replayed++
		case models.ErrorCode(errs[i]) == models.ERequestInProgress:
			inProgress++
		default:
			t.Errorf("caller %d: %v (replayed %v), %v; want the response, a replay or %s", i, resps[i], resps[i].Replayed, errs[i], models.ERequestInProgress)
		}
	}
	if ran != 1 {
		t.Errorf("%d callers ran the request (%d replays, %d in progress), want 1", ran, replayed, inProgress)
	}
	if c := countProducts(t, db, "SKU-RACE"); c != 1 {
		t.Errorf("%d products written, want 1", c)
	}
	if rows := keyRows(t, db, scope, key); len(rows) != 1 || rows[0].ResponseCode == nil || *rows[0].ResponseCode != 201 || rows[0].LockedAt != nil {
		t.Errorf("key rows %+v; want one with the stored 201", rows)
	}
}

// A key whose first request has run for longer than the lock timeout —
// twice the request timeout, at least MinLockTimeout — without an answer
// is taken over by the next request for it: at exactly the lock timeout
// the next one still gets ERequestInProgress, a microsecond later it runs.
// The first request, finishing after that, gets ERequestInProgress
// ("another request took over") and its effect is rolled back; the key
// keeps the taker's response and effect.
func TestDoTakesOverStaleKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		requestTimeout time.Duration
		lockTimeout    time.Duration
	}{
		{"short requests lock for MinLockTimeout", 10 * time.Second, idempotency.MinLockTimeout},
		{"long requests lock for twice their timeout", 2 * time.Minute, 4 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := testenv.NewDB(t)
			clk := newClock()
			k := idempotency.New(db, clk.Now, c.requestTimeout)
			ctx := context.Background()
			var atLimit, taken error
			var taker idempotency.Response
			takerCalls := 0
			takerFn := func(tx *gorm.DB) (idempotency.Response, error) {
				takerCalls++
				if err := createProduct(tx, "SKU-TAKER"); err != nil {
					return idempotency.Response{}, err
				}
				return idempotency.Response{Code: 201, Body: []byte(`{"by":"taker"}`)}, nil
			}
			_, err := k.Do(ctx, scope, key, "hash-a", func(tx *gorm.DB) (idempotency.Response, error) {
				if err := createProduct(tx, "SKU-STUCK"); err != nil {
					return idempotency.Response{}, err
				}
				clk.Advance(c.lockTimeout)
				_, atLimit = k.Do(ctx, scope, key, "hash-a", takerFn)
				clk.Advance(time.Microsecond)
				taker, taken = k.Do(ctx, scope, key, "hash-a", takerFn)
				return idempotency.Response{Code: 201, Body: []byte(`{"by":"stuck"}`)}, nil
			})
			if models.ErrorCode(atLimit) != models.ERequestInProgress {
				t.Errorf("at exactly the lock timeout: %v; want %s", atLimit, models.ERequestInProgress)
			}
			if taken != nil || taker.Code != 201 || string(taker.Body) != `{"by":"taker"}` || taker.Replayed {
				t.Errorf("past the lock timeout: %v (replayed %v), %v; want the taker's own 201", taker, taker.Replayed, taken)
			}
			if takerCalls != 1 {
				t.Errorf("the taker's fn ran %d times, want 1", takerCalls)
			}
			if models.ErrorCode(err) != models.ERequestInProgress {
				t.Errorf("the stuck request, finishing late: %v; want %s", err, models.ERequestInProgress)
			}
			if n := countProducts(t, db, "SKU-STUCK"); n != 0 {
				t.Errorf("the stuck request's effect: %d rows, want 0 (rolled back)", n)
			}
			if n := countProducts(t, db, "SKU-TAKER"); n != 1 {
				t.Errorf("the taker's effect: %d rows, want 1", n)
			}
			again, err := k.Do(ctx, scope, key, "hash-a", takerFn)
			if err != nil || !again.Replayed || string(again.Body) != `{"by":"taker"}` || takerCalls != 1 {
				t.Errorf("a later request: %v (replayed %v), %v; want the taker's stored response", again, again.Replayed, err)
			}
		})
	}
}

// A key is looked up within its scope: the same key (even with another
// request hash) in two scopes runs fn in each, and each scope replays its
// own response.
func TestDoScopesAreIndependent(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := idempotency.New(db, time.Now, 30*time.Second)
	ctx := context.Background()
	calls := map[string]int{}
	fnFor := func(scope string) func(tx *gorm.DB) (idempotency.Response, error) {
		return func(tx *gorm.DB) (idempotency.Response, error) {
			calls[scope]++
			if err := createProduct(tx, "SKU-"+scope); err != nil {
				return idempotency.Response{}, err
			}
			return idempotency.Response{Code: 201, Body: []byte(scope)}, nil
		}
	}
	scopes := []string{"orders.create", "admin.products.create"}
	for i, s := range scopes {
		resp, err := k.Do(ctx, s, key, "hash-"+s, fnFor(s))
		if err != nil || resp.Replayed || string(resp.Body) != s {
			t.Fatalf("scope %d %s: %v (replayed %v), %v; want its own run", i, s, resp, resp.Replayed, err)
		}
	}
	for _, s := range scopes {
		resp, err := k.Do(ctx, s, key, "hash-"+s, fnFor(s))
		if err != nil || !resp.Replayed || string(resp.Body) != s {
			t.Errorf("replay in %s: %v (replayed %v), %v; want its own stored response", s, resp, resp.Replayed, err)
		}
		if calls[s] != 1 {
			t.Errorf("fn of %s ran %d times, want 1", s, calls[s])
		}
		if n := countProducts(t, db, "SKU-"+s); n != 1 {
			t.Errorf("%d products for %s, want 1", n, s)
		}
	}
	var rows int64
	db.Model(&models.APIIdempotencyKey{}).Where("key = ?", key).Count(&rows)
	if rows != 2 {
		t.Errorf("%d key rows, want 2", rows)
	}
}
