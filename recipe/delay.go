package recipe

import "time"

// MaxLockDelay bounds the lock-delay option of every backend's lock,
// WithLockDelay(d) (Chubby's, docs/lock-delay.md): a grant that
// follows an unclean end of the previous holder (any end but Release: its
// session expired or closed, its lease lost, its entry deleted) waits d
// first, free to nobody meanwhile (TryAcquire: ErrLocked), so that the
// failed holder's requests in flight land first; one that gives up leaves
// the rest to the next contender. After a Release nobody waits. 0 (the
// default) costs nothing; d < 0 or d > MaxLockDelay fails New with
// ErrBadOption. Give every contender of a lock the same d (one without it
// neither records nor serves a delay); fence the writes too where you can.
const MaxLockDelay = 10 * time.Minute // Chubby's cap is a minute: ten allow slow calls, and refuse an hour (a typo)

// LockDelayServed returns the lock-delay the grant l served (MaxLockDelay):
// what this contender waited once next in line, not the whole delay if
// another contender served part of it and gave up. It is at most the
// option's d, except on Redis after an operator deleted the held key, where
// the rest of that holder's lease comes first. It is zero for a grant that
// served none: after a Release, on a free lock, without the option.
func LockDelayServed(l Lease) time.Duration {
	if d, ok := l.(interface{ LockDelay() time.Duration }); ok {
		return d.LockDelay()
	}
	return 0
}

// DelayMetrics is an optional extension of Metrics: a Metrics that also
// implements it is told of every lock-delay served, with its length, on
// the contender's goroutine after the wait ended in a grant. kind and dir
// are as for Metrics.
type DelayMetrics interface {
	LockDelayServed(kind, dir string, d time.Duration)
}
