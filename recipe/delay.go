package recipe

import "time"

// MaxLockDelay bounds a lock-delay option: a longer one is refused with
// ErrBadOption. Chubby, where the lock-delay comes from, caps it at a
// minute; ten allow for slow third-party calls while keeping a typo (an
// hour) from locking everyone out.
const MaxLockDelay = 10 * time.Minute

// LockDelayServed returns the lock-delay the grant l served: the time this
// contender waited (not the delay's whole length), once next in line,
// because its lock's previous holder ended uncleanly (its session expired
// or closed, its entry was deleted by someone else, its connection ended)
// — Chubby's lock-delay (Burrows, OSDI 2006, section 2.4), an option of
// every backend's lock. It is at most the option's length, except on Redis
// after an operator deleted the held key, where the rest of that holder's
// lease comes first (docs/lock-delay.md). It is zero for a grant
// that served none: after a clean Release, on a free lock, or without the
// option. A
// lock-delay keeps a failed holder's in-flight requests from meeting the
// next holder's at a resource that cannot check fencing tokens; where the
// resource can, fence the writes as well (docs/fencing.md).
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
