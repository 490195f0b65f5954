package emulation_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/testenv"
)

// Kept keeps the newest max entries: a replaced entry counts once, and
// the oldest is evicted first.
func TestKeptEvictsTheOldest(t *testing.T) {
	t.Parallel()
	k := emulation.NewKept[int](2)
	k.Put("a", 1)
	k.Put("b", 2)
	k.Put("a", 3) // a is now the newest
	k.Put("c", 4) // evicts b
	var got []string
	k.Newest(func(key string, v int) bool { got = append(got, key); return true })
	if _, ok := k.Get("b"); ok || !slices.Equal(got, []string{"c", "a"}) {
		t.Errorf("newest first %v, b kept %v; want [c a], b evicted", got, ok)
	}
	if v, _ := k.Get("a"); v != 3 {
		t.Errorf("a = %d, want 3", v)
	}
}

// The fault switches count down over the calls: FailNext answers the
// gateway's 500 without acting, TimeOutAfterActing acts and gives no
// answer at all (held until the caller gives up), FailRefundsLater says
// so once per refund; then calls answer as act says.
func TestFaultsCountDown(t *testing.T) {
	t.Parallel()
	var f emulation.Faults
	var acted atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Call(w, r, []byte(`{"error":"internal"}`), func() (int, http.Header, []byte) {
			acted.Add(1)
			return http.StatusCreated, http.Header{"Idempotent-Replayed": {"false"}}, []byte(`{"id":"x"}`)
		})
	}))
	t.Cleanup(srv.Close)
	call := func(ctx context.Context) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		res, err := srv.Client().Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), nil
	}

	f.FailNext(1)
	if code, body, err := call(t.Context()); code != 500 || body != `{"error":"internal"}` || acted.Load() != 0 {
		t.Fatalf("failed call: %d %s %v, acted %d; want 500 and the gateway's error, not acted", code, body, err, acted.Load())
	}

	f.TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, _, err := call(ctx); done <- err }()
	testenv.Eventually(t, "the call acted and is held", func() bool { return f.Held() == 1 })
	if acted.Load() != 1 {
		t.Fatalf("acted %d times, want once before holding", acted.Load())
	}
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("a held call was answered")
	}
	testenv.Eventually(t, "no call held", func() bool { return f.Held() == 0 })

	if code, body, err := call(t.Context()); code != 201 || body != `{"id":"x"}` || err != nil {
		t.Fatalf("after the faults: %d %s %v; want act's answer", code, body, err)
	}

	f.FailRefundsLater(1)
	if !f.FailLater() || f.FailLater() || f.FailedLater() != 1 {
		t.Errorf("FailLater once, then not; FailedLater %d, want 1", f.FailedLater())
	}
}
