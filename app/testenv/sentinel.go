package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinels of StartSentinel monitor.
const SentinelMaster = "mymaster"

// SentinelGroup is a Redis primary, one replica and three Sentinels of
// the test's own, each a redis-server on a free port that keeps nothing on
// disk, so a test can kill the primary and watch the Sentinels promote the
// replica without touching anyone else's Redis.
type SentinelGroup struct {
	tb        testing.TB
	Primary   *RedisServer // the primary at the start
	Replica   *RedisServer // replicates Primary; promoted when it dies
	Sentinels []*RedisServer
}

// StartSentinel starts the group and returns once the Sentinels know the
// replica and each other, so that a failover can happen. Everything is
// stopped when the test ends.
//
// The Sentinels judge the primary down after 1 s without an answer
// (down-after-milliseconds), with a quorum of two; a failover that stalls
// is tried again after 6 s (twice failover-timeout).
func StartSentinel(tb testing.TB) *SentinelGroup {
	tb.Helper()
	g := &SentinelGroup{tb: tb}
	g.Primary = startRedis(tb, "", "--dir", tb.TempDir())
	_, primaryPort, _ := net.SplitHostPort(g.Primary.Addr)
	g.Replica = startRedis(tb, "", "--dir", tb.TempDir(), "--replicaof", "127.0.0.1", primaryPort)
	// A Sentinel learns the replicas from the primary's INFO, which it
	// reads at once and then every 10 s: start them with the link up.
	replica := redis.NewClient(&redis.Options{Addr: g.Replica.Addr, MaxRetries: -1})
	defer replica.Close()
	waitRedis(tb, "the replica's link to the primary", func(ctx context.Context) bool {
		info, err := replica.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf") // a Sentinel rewrites its config file: it must be its own
		err := os.WriteFile(conf, []byte(fmt.Sprintf(`sentinel monitor %[1]s 127.0.0.1 %[2]s 2
sentinel down-after-milliseconds %[1]s 1000
sentinel failover-timeout %[1]s 3000
`, SentinelMaster, primaryPort)), 0o600)
		if err != nil {
			tb.Fatal(err)
		}
		g.Sentinels = append(g.Sentinels, startRedis(tb, conf, "--sentinel", "--dir", dir))
	}
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		waitRedis(tb, "Sentinel "+s.Addr+" to know the replica and the other Sentinels", func(ctx context.Context) bool {
			m, err := sc.Master(ctx, SentinelMaster).Result()
			return err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2"
		})
		sc.Close()
	}
	return g
}

// URL is the group's redis-sentinel:// URL.
func (g *SentinelGroup) URL() string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "/?master=" + SentinelMaster
}

// KillPrimary kills the primary with SIGKILL: whatever it had not yet
// sent to the replica is lost, as in a crash.
func (g *SentinelGroup) KillPrimary() { g.Primary.Stop() }

// WaitPromoted waits until the replica says it is the primary and every
// Sentinel names it as the primary.
func (g *SentinelGroup) WaitPromoted() {
	g.tb.Helper()
	replica := redis.NewClient(&redis.Options{Addr: g.Replica.Addr, MaxRetries: -1})
	defer replica.Close()
	sentinels := make([]*redis.SentinelClient, len(g.Sentinels))
	for i, s := range g.Sentinels {
		sentinels[i] = redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		defer sentinels[i].Close()
	}
	waitRedis(g.tb, "the Sentinels to promote the replica", func(ctx context.Context) bool {
		role, err := replica.Do(ctx, "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "master" {
			return false
		}
		for _, sc := range sentinels {
			addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
			if err != nil || len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != g.Replica.Addr {
				return false
			}
		}
		return true
	})
}

// waitRedis is Eventually for a condition that asks Redis: each try gets
// a context of its own, so a server that does not answer fails that try,
// not the wait.
func waitRedis(tb testing.TB, what string, cond func(context.Context) bool) {
	tb.Helper()
	Eventually(tb, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return cond(ctx)
	})
}
