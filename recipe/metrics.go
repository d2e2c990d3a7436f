package recipe

import (
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Metrics receives the events of a backend's sessions, of the locks on
// them and of leader.Run, for metrics and tracing. A backend installs it
// with an option of its own (zookeeper.WithMetrics, etcdlock.WithMetrics,
// pglock.WithMetrics, redislock.WithMetrics, memlock.WithMetrics; and
// leader.WithMetrics for leader.Run), whose doc says which events that
// backend reports: AcquireStarted, AcquireDone, Waiting and LeaseLost on
// every backend, SessionState on ZooKeeper and etcd only. Package
// recipe/zkprom is a ready Prometheus adapter for all of them; this package
// depends on no metrics library.
//
// In every method, kind says what reports and dir which one: on ZooKeeper
// kind is the recipe's node kind without its trailing dash ("lock" for a
// mutex, "read" and "write" for the sides of a read-write lock, "lease" for
// a semaphore, "elect" for an election, "latch" for a leader latch) and dir
// the recipe's directory, relative to the session's chroot; on the other
// backends kind is "lock" and dir the lock's name as given to New; for
// leader.Run kind is "leader" and dir the name given to leader.WithMetrics.
//
// The methods are called synchronously, on the goroutines said per method,
// possibly from many goroutines at once, and some while the backend holds
// a lock of its own: an implementation must be safe for concurrent use,
// must return quickly, must not block (no I/O, no waiting on channels or on
// locks held across I/O) and must not call back into the session, its
// locks or leader.Run. Incrementing counters and observing histograms is
// what they are for.
//
// Without a Metrics nothing is called and nothing is measured: the cost is
// one nil check per event.
type Metrics interface {
	// AcquireStarted is called when an acquisition starts, on the caller's
	// goroutine: every Acquire and TryAcquire of a Lock (on ZooKeeper, every
	// acquisition of a queue: also election's Campaign and a read-write
	// lock's Downgrade), and each attempt of leader.Run to take its lock.
	AcquireStarted(kind, dir string)

	// AcquireDone is called when that acquisition returns, on the caller's
	// goroutine, with the time it took (wall-clock duration, including the
	// wait for other holders) and its error: nil for a grant, an error
	// matching ErrLocked for a TryAcquire that found the lock held, ctx's
	// cause (context.Canceled, context.DeadlineExceeded, or the cause given
	// to the context) when the caller gave up, or any other error of the
	// acquisition.
	AcquireDone(kind, dir string, took time.Duration, err error)

	// Waiting is called with delta +1 when a contender starts waiting
	// behind other holders (the backend said "not yet"), and with delta -1
	// when it stops waiting (granted, gave up, or failed), on the
	// contender's goroutine. The sum of deltas per kind and dir is the
	// number of this process's contenders waiting there. On ZooKeeper,
	// leader latch tickets waiting in Ticket.Await count too.
	Waiting(kind, dir string, delta int)

	// LeaseLost is called when a granted lease ends for any reason other
	// than its own Release (on ZooKeeper, or Ticket.Leave), with the cause
	// that context.Cause of the lease's context reports: an error matching
	// ErrSuspended, ErrSessionLost, ErrSessionClosed or ErrNodeDeleted. A
	// backend calls it on the goroutine that found the loss (its watchdog
	// or keep-alive goroutine, the client library's event delivery, or
	// Close's caller), possibly while holding a lock of its own. leader.Run
	// calls it on its own goroutine when a term ends because its lease was
	// lost (not when fn returns or Run's context ends).
	LeaseLost(kind, dir string, cause error)

	// SessionState is called on every connection-state transition of a
	// session, by the backends whose sessions have a connection state
	// (ZooKeeper and etcd; see their WithMetrics), with the previous state
	// (0 before the first one) and the new one; cause is set for SUSPENDED
	// and LOST. Close reports one last call with to LOST and a cause
	// matching ErrSessionClosed (from LOST too, when the session was
	// already lost): the session reports nothing after it. It is called on
	// the goroutine that saw the transition (the client library's event
	// delivery, a watchdog, Close's caller), possibly while the backend
	// holds a lock of its own.
	SessionState(from, to ConnState, cause error)

	// StaleRejected is called when a fence.Guard rejects a write carrying a
	// stale token. No backend calls it by itself: package fence depends on
	// nothing of this module, so wire it at the resource with
	// guard.OnStale = m.StaleRejected (called on the writer's goroutine,
	// outside the Guard's locks).
	StaleRejected(e *fence.StaleError)
}
