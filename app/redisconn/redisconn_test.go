package redisconn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sekali/sekali/app/lock"
	"github.com/sekali/sekali/app/redisconn"
	"github.com/sekali/sekali/app/testenv"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url      string
		sentinel bool
		err      string // a part of the error; empty: no error
	}{
		{url: "redis://127.0.0.1:6379/0"},
		{url: "redis://:secret@127.0.0.1:6379/2"},
		{url: "rediss://cache.example.com:6380/0"},
		{url: "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/?master=mymaster", sentinel: true},
		{url: "redis-sentinel://:sentinel-pw@10.0.0.1:26379?master=mymaster&db=3&password=primary-pw", sentinel: true},
		{url: "redis-sentinel://10.0.0.1:26379/?master=mymaster&db=x", err: `db "x" is not a database number`},
		{url: "redis-sentinel://10.0.0.1:26379/", err: "no ?master=name"},
		{url: "redis-sentinel://10.0.0.1,10.0.0.2:26379/?master=m", err: `sentinel address "10.0.0.1" is not host:port`},
		{url: "redis-sentinel:///?master=m", err: "no sentinel addresses"},
		{url: "redis-sentinel://10.0.0.1:26379/2?master=m", err: "the database goes in ?db=N"},
		{url: "redis-sentinel://10.0.0.1:26379/?master=m&master_name=m", err: `unknown parameter "master_name"`},
		{url: "redis://127.0.0.1:6379/x", err: "invalid database number"},
		{url: "redis:///0", err: "no host"},
		{url: "http://127.0.0.1:6379", err: `scheme "http" is not one of redis, rediss, redis-sentinel`},
		{url: "redis://:pw@127.0.0.1:port/0", err: "not a URL"},
	} {
		c, err := redisconn.Parse(tc.url)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tc.url, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.url, err, tc.err)
		case err == nil && c.Sentinel() != tc.sentinel:
			t.Errorf("Parse(%q).Sentinel() = %v", tc.url, c.Sentinel())
		}
		if err != nil && (strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "secret")) {
			t.Errorf("Parse(%q): the error shows a password: %v", tc.url, err)
		}
	}
}

func TestRedactMasksBothPasswords(t *testing.T) {
	t.Parallel()
	got := redisconn.Redact("redis-sentinel://:sentinel-pw@10.0.0.1:26379/?master=m&password=primary-pw")
	if strings.Contains(got, "-pw") || !strings.Contains(got, "10.0.0.1:26379") || !strings.Contains(got, "master=m") {
		t.Fatalf("Redact = %q", got)
	}
}

// TestClientFollowsTheFailover uses the client of a redis-sentinel:// URL
// across a failover: the primary is killed, the Sentinels promote the
// replica, and the same client — the one the job locks, the queue and
// /readyz share — writes to the new primary, Lua scripts included (the
// new primary has never seen them: go-redis falls back from EVALSHA to
// EVAL).
func TestClientFollowsTheFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the Redis primary and waits for the Sentinels' failover: make test runs it")
	}
	t.Parallel()
	g := testenv.StartSentinel(t)
	c, err := redisconn.Parse(g.URL() + "&db=1")
	if err != nil {
		t.Fatal(err)
	}
	rdb := c.NewClient()
	defer rdb.Close()
	ctx := context.Background()

	held, ok, err := lock.Acquire(ctx, rdb, "lock:before", time.Minute)
	if err != nil || !ok {
		t.Fatalf("Acquire before the failover = %v, %v", ok, err)
	}
	if err := held.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh before the failover: %v", err)
	}
	direct := redis.NewClient(&redis.Options{Addr: g.Primary.Addr, DB: 1})
	defer direct.Close()
	if direct.Exists(ctx, "lock:before").Val() != 1 {
		t.Fatal("the lock is not in db 1 of the primary: the URL's db was not used")
	}

	if n, err := rdb.Do(ctx, "WAIT", 1, 10_000).Int(); err != nil || n != 1 { // the replica has it all
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	g.KillPrimary()
	g.WaitPromoted()

	testenv.Eventually(t, "the client to find the new primary on its own", func() bool {
		return rdb.Ping(ctx).Err() == nil
	})
	after, ok, err := lock.Acquire(ctx, rdb, "lock:after", time.Minute)
	if err != nil || !ok {
		t.Fatalf("Acquire after the failover = %v, %v", ok, err)
	}
	if err := after.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh after the failover (script unknown to the new primary): %v", err)
	}
	if err := after.Release(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := redis.NewClient(&redis.Options{Addr: g.Replica.Addr, DB: 1})
	defer promoted.Close()
	if promoted.Exists(ctx, "lock:after").Val() != 0 || promoted.Exists(ctx, "lock:before").Val() != 1 {
		t.Fatal("the client did not write to the promoted replica")
	}
}
