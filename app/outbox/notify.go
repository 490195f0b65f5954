package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Channel is what the relay LISTENs on (jobs.Relay).
const Channel = "outbox_messages"

// notifyGap is the least time between two notifications: a relay woken
// once claims everything that is due, so a burst of commits needs one.
const notifyGap = 10 * time.Millisecond

// Notify wakes the relays now, in a statement of its own.
func Notify(ctx context.Context, db *gorm.DB) error {
	return db.WithContext(ctx).Exec("SELECT pg_notify(?, '')", Channel).Error
}

// Notifier wakes the relays after a transaction that wrote due tasks has
// committed, so they need not wait for their poll.
//
// The NOTIFY is sent apart from that transaction, on purpose. A
// transaction that notifies takes a lock on the whole database's
// notification queue at its commit and holds it until the commit is
// flushed to disk; when every paying callback notified (a trigger on
// outbox_messages did, until migration 00010), their commits queued on
// that lock one after the other and waited on it more than on anything
// else (docs/performance.md). A wake that comes while a NOTIFY is on its
// way is folded into the next one; a lost NOTIFY costs at most a poll.
type Notifier struct {
	db      *gorm.DB
	log     *slog.Logger
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	close   sync.Once
}

// NewNotifier starts a notifier; Close stops it.
func NewNotifier(db *gorm.DB, log *slog.Logger) *Notifier {
	n := &Notifier{db: db, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go n.run()
	return n
}

// Wake asks for a NOTIFY; it never blocks.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default: // one is asked for already
	}
}

// Close stops the notifier. A second Close does nothing.
func (n *Notifier) Close() {
	n.close.Do(func() { close(n.stop) })
	<-n.stopped
}

func (n *Notifier) run() {
	defer close(n.stopped)
	for {
		select {
		case <-n.stop:
			return
		case <-n.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := Notify(ctx, n.db); err != nil {
			n.log.Warn("outbox: could not wake the relays; they find the tasks at their next poll", "error", err)
		}
		cancel()
		select {
		case <-n.stop:
			return
		case <-time.After(notifyGap):
		}
	}
}
