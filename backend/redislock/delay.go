package redislock

import (
	"context"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
)

// MutexOption configures a Mutex (New).
type MutexOption func(*Mutex)

// WithLockDelay sets the lock-delay of the Mutex (Chubby's; see
// recipe.LockDelayServed): when a grant of it ends without a Release (the
// holder crashed or was cut off and its key expired, the key was deleted
// by someone else, the lease was lost, or Session.Close ended it), the
// lock stays taken for d more, so that the holder's requests still in
// flight drain before the next holder starts; after a Release the next
// holder starts at once. 0 (the default) serves none; d is rounded up to
// a whole millisecond (the unit of PX); more than recipe.MaxLockDelay
// makes New fail with recipe.ErrBadOption.
//
// How: a grant made with the option writes the lock's marker key
// (DelayKey: "held:" and its owner), set in the same script as the lock
// key and expiring d after it (renewals move both). Release deletes the
// marker in the same script as the lock key. So a marker that outlives its
// holder's key records an unclean end, and its remaining PTTL is the rest
// of the delay on the server's clock. The contender the lock is due to
// keeps the lock key reserved for itself meanwhile ("next:" and its
// owner: TryAcquire answers ErrLocked), waits the rest out
// (grant.ServeDelay: an INFO line, and recipe.DelayMetrics), and asks
// again. If it gives up, the lock goes to the next waiter and the marker
// keeps its expiry: the delay is not shortened. A Session.Close without
// Release, or a lease lost and deleted by its own cleanup, counts as
// unclean: the marker then expires d after that delete. After a delete of
// the lock key by someone else the delay ends d after the key would have
// expired (up to the TTL + d after the delete).
//
// Every Mutex of a name should be given the same delay. A Mutex without
// the option neither writes nor reads the marker: it serves no delay (it
// may take a lock whose delay nobody is serving) and its grants record
// nothing. A Mutex with the option serves what the marker says, at most
// its own TTL + d (a longer or unending marker, not written by this
// package, is cut to that).
func WithLockDelay(d time.Duration) MutexOption { return func(m *Mutex) { m.delay = d } }

// delayMs is the lock-delay in whole milliseconds (rounded up: a positive
// delay is never turned off), 0 without the option.
func (m *Mutex) delayMs() int64 {
	return int64((m.delay + time.Millisecond - 1) / time.Millisecond)
}

// DelayKey returns the Redis key of the lock's lock-delay marker (see
// WithLockDelay): "held:" and the owner id of the last grant made with the
// option, while it holds and for the delay after its key is gone without a
// Release. It always expires; nothing else is stored in it.
func (m *Mutex) DelayKey() string { return m.marker }

// markerTTL is the marker's expiry set by a grant or a renewal: the
// delay after the lock key's (0 without the option).
func (m *Mutex) markerTTL() int64 {
	if m.delay == 0 {
		return 0
	}
	return m.s.ttl.Milliseconds() + m.delayMs()
}

// ending says how a delete of the lock key ends its grant, for the marker.
type ending bool

const (
	// clean: Release was called, or the grant was never handed out (an
	// Acquire that gave up): the marker is deleted, no delay follows.
	clean ending = true
	// unclean: the lease ended without Release (Session.Close, or a lost
	// lease's cleanup): the delay runs from the delete.
	unclean ending = false
)

// markerArg is the release script's ARGV[4] for a delete that ends a grant
// as e: "0" without the option.
func (m *Mutex) markerArg(e ending) string {
	switch {
	case m.delay == 0:
		return "0"
	case e == clean:
		return "clean"
	}
	return strconv.FormatInt(m.delayMs(), 10)
}

// serveDelay waits out the rest of a lock-delay (the acquire script's
// answer 2) for an Acquire to which the lock is reserved meanwhile, and
// adds it to *served. Only the first wait of an Acquire is logged (a
// second one is the few milliseconds by which the server's clock and this
// one disagree). Errors: ctx's cause.
func (m *Mutex) serveDelay(ctx context.Context, rest time.Duration, served *time.Duration) error {
	rep := m.rep
	if *served > 0 {
		rep = nil
	}
	if err := grant.ServeDelay(ctx, rest, rep); err != nil {
		return err
	}
	*served += rest
	return nil
}
