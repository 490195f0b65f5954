// Package lock is a Redis lock with an owner token: SET NX PX to take it,
// and compare-and-expire / compare-and-delete scripts to refresh and
// release it, so a worker can never extend or free a lock that has passed
// to someone else. It is a first filter only: a lock can expire while its
// holder still works, so the database write is fenced as well (jobs/guard.go).
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotHeld is returned by Refresh when the lock expired or has another owner.
var ErrNotHeld = errors.New("lock: not held")

var (
	refreshScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)
	releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)
)

// Lock is one held lock.
type Lock struct {
	rdb   redis.UniversalClient
	Key   string
	Token string
}

// Acquire takes key for ttl with a new random owner token. ok is false when
// someone else holds it.
func Acquire(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (l *Lock, ok bool, err error) {
	b := make([]byte, 16)
	rand.Read(b)
	token := hex.EncodeToString(b)
	ok, err = rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil || !ok {
		return nil, false, err
	}
	return &Lock{rdb: rdb, Key: key, Token: token}, true, nil
}

// Refresh extends the lock to ttl from now if it is still ours.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	n, err := refreshScript.Run(ctx, l.rdb, []string{l.Key}, l.Token, ttl.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

// Release frees the lock if it is still ours; a lock that passed to
// another owner is left alone.
func (l *Lock) Release(ctx context.Context) error {
	return releaseScript.Run(ctx, l.rdb, []string{l.Key}, l.Token).Err()
}
