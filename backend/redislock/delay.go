package redislock

import (
	"strconv"
	"time"
)

// MutexOption configures a Mutex (New).
type MutexOption func(*Mutex)

// WithLockDelay sets the Mutex's lock-delay to d, rounded up to a whole
// millisecond (PX's unit), with the contract of every backend's option
// (recipe.MaxLockDelay). The record is the marker key DelayKey, written
// with the lock key by every grant and renewal to expire d after it, and
// deleted with it by Release: a marker without its key is an unclean end,
// its PTTL the rest of the delay on the server's clock. After a delete of
// the key by someone else, the rest of its TTL comes first; a marker not
// written by this package is served at most TTL + d
// (docs/lock-delay.md#lock-delay-on-redis).
func WithLockDelay(d time.Duration) MutexOption { return func(m *Mutex) { m.delay = d } }

// delayMax is the most a contender may serve: the rest of a deleted
// holder's TTL, then the delay.
func (m *Mutex) delayMax() time.Duration {
	return m.s.ttl + time.Duration(m.delayMs())*time.Millisecond
}

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
