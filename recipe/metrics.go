package recipe

import (
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Metrics receives the events of a backend's sessions and locks, and of
// leader.Run; each backend installs it with its own WithMetrics, whose doc
// says which events it reports, and recipe/prommetrics exports them. kind and dir
// name the reporter: a ZooKeeper recipe's node kind without its dash
// ("lock", "read", "write", "lease", "elect", "latch") and its directory;
// "lock" and the lock's name on the other backends; "leader" and its name
// for leader.Run. Methods are called synchronously and concurrently, some
// under a backend's lock: they must return quickly, never block, and never
// call back into the session, its locks or leader.Run (docs/metrics.md).
type Metrics interface {
	// AcquireStarted is called on the caller's goroutine when an acquisition
	// starts (also Campaign, Downgrade, and each attempt of leader.Run).
	AcquireStarted(kind, dir string)

	// AcquireDone is called as it returns, on that goroutine, with its
	// wall-clock duration and its error (nil for a grant, ErrLocked, ...).
	AcquireDone(kind, dir string, took time.Duration, err error)

	// Waiting is called on the contender's goroutine with +1 as it starts
	// waiting behind other holders and -1 as it stops.
	Waiting(kind, dir string, delta int)

	// LeaseLost is called when a granted lease ends other than by its own
	// Release, with its cause (ErrSuspended, ErrSessionLost, ErrSessionClosed
	// or ErrNodeDeleted), on the goroutine that found the loss, possibly
	// under a backend's lock; by leader.Run for a term lost with its lease.
	LeaseLost(kind, dir string, cause error)

	// SessionState is called at every connection-state transition of a
	// session (ZooKeeper and etcd), with the previous state (0 before the
	// first) and the new one; cause is set for SUSPENDED and LOST. Close ends
	// with one call to LOST, cause ErrSessionClosed. Called as LeaseLost is.
	SessionState(from, to ConnState, cause error)

	// StaleRejected is for a fence's rejections: no backend calls it; wire
	// it at the resource as the fence's OnStale (fence.Guard, fencesql,
	// fencezk, fenceetcd, fenceredis: f.OnStale = m.StaleRejected).
	StaleRejected(e *fence.StaleError)
}
