package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/lock"
	"github.com/sekali/sekali/app/testenv"
)

func TestOnlyTheOwnerRefreshesAndReleases(t *testing.T) {
	t.Parallel()
	rdb := testenv.NewRedis(t)
	ctx := context.Background()

	first, ok, err := lock.Acquire(ctx, rdb, "lock:k", time.Minute)
	if err != nil || !ok {
		t.Fatalf("first Acquire = %v, %v", ok, err)
	}
	if _, ok, _ := lock.Acquire(ctx, rdb, "lock:k", time.Minute); ok {
		t.Fatal("a second Acquire took a held lock")
	}
	if err := first.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("owner Refresh: %v", err)
	}

	// The lock passes to someone else (as after an expiry): the old owner
	// can neither extend nor free it.
	rdb.Del(ctx, "lock:k")
	second, ok, _ := lock.Acquire(ctx, rdb, "lock:k", time.Minute)
	if !ok {
		t.Fatal("Acquire after the key was freed failed")
	}
	if err := first.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale owner Refresh = %v, want ErrNotHeld", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, "lock:k").Val(); v != second.Token {
		t.Fatalf("stale owner Release freed the new owner's lock (value %q)", v)
	}
	if err := second.Release(ctx); err != nil || rdb.Exists(ctx, "lock:k").Val() != 0 {
		t.Fatalf("owner Release: %v, exists %d", err, rdb.Exists(ctx, "lock:k").Val())
	}
}

func TestLockExpires(t *testing.T) {
	t.Parallel()
	rdb := testenv.NewRedis(t)
	ctx := context.Background()
	l, _, _ := lock.Acquire(ctx, rdb, "lock:ttl", 50*time.Millisecond)
	if ttl := rdb.PTTL(ctx, "lock:ttl").Val(); ttl <= 0 || ttl > 50*time.Millisecond {
		t.Fatalf("PTTL = %v, want (0, 50ms]", ttl)
	}
	for rdb.Exists(ctx, "lock:ttl").Val() == 1 { // wait for the expiry itself
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Refresh of an expired lock = %v, want ErrNotHeld", err)
	}
}

func TestConcurrentAcquireHasOneWinner(t *testing.T) {
	t.Parallel()
	rdb := testenv.NewRedis(t)
	var mu sync.Mutex
	winners := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, ok, err := lock.Acquire(context.Background(), rdb, "lock:race", time.Minute); err == nil && ok {
				mu.Lock()
				winners++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if winners != 1 {
		t.Fatalf("winners = %d, want 1", winners)
	}
}
