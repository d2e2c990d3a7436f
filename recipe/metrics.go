package recipe

import (
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Metrics receives the events of a backend's session and of every lock that
// runs on it, for metrics and tracing. Every backend installs it with an
// option of its own (zookeeper.WithMetrics, etcdlock.WithMetrics, ...);
// package recipe/zkprom is a ready Prometheus adapter. This package itself
// depends on no metrics library.
//
// In every method, kind is the node kind of the recipe without its trailing
// dash ("lock" for a mutex, "read" and "write" for the sides of a read-write
// lock, "lease" for a semaphore, "elect" for an election, "latch" for a
// leader latch), and dir is the recipe's directory, relative to the Session's
// chroot, as given to the recipe's constructor.
//
// The methods are called synchronously, some of them while the Session holds
// its internal lock or from go-zookeeper's event delivery (as said per
// method), and possibly from many goroutines at once: an implementation must
// be safe for concurrent use, must return quickly, must not block (no I/O, no
// waiting on channels or locks held across I/O) and must not call back into
// the Session or its recipes. Incrementing counters and observing histograms
// is what they are for.
//
// Without WithMetrics nothing is called and nothing is measured: the cost is
// one nil check per event.
type Metrics interface {
	// AcquireStarted is called when an Acquire, TryAcquire or
	// AcquireAnchored of a Queue starts (so every acquisition of package
	// mutex, and election's Campaign), on the caller's goroutine.
	AcquireStarted(kind, dir string)

	// AcquireDone is called when that call returns, on the caller's
	// goroutine, with the time it took (wall-clock duration, including the
	// wait for other holders) and its error: nil for a grant, an error
	// matching ErrLocked for a TryAcquire that found the lock held, ctx's
	// cause (context.Canceled, context.DeadlineExceeded, or the cause given
	// to the context) when the caller gave up, or any other error of
	// Queue.Acquire.
	AcquireDone(kind, dir string, took time.Duration, err error)

	// Waiting is called with delta +1 when a contender of this Session
	// starts waiting in the queue (the recipe's rule said "not yet" for its
	// node), and with delta -1 when it stops waiting (granted, gave up, or
	// failed), on the contender's goroutine. The sum of deltas per kind and
	// dir is the number of this process's contenders queued there. Leader
	// latch tickets waiting in Ticket.Await count too.
	Waiting(kind, dir string, delta int)

	// LeaseLost is called when a granted lease ends for any reason other
	// than its own Release (or Ticket.Leave), with the cause that
	// context.Cause of the lease's context reports: an error matching
	// ErrSuspended, ErrSessionLost, ErrSessionClosed or ErrNodeDeleted. It
	// is called while the Session holds its internal lock, possibly from
	// go-zookeeper's event delivery or the Session's watchdog goroutine.
	LeaseLost(kind, dir string, cause error)

	// SessionState is called on every connection-state transition of the
	// Session (the same transitions Session.Listen delivers), with the
	// previous state (0 before the first session) and the new one; cause
	// is set for SUSPENDED and LOST. Close reports one last call with to
	// LOST and a cause matching ErrSessionClosed (from LOST too, when the
	// session was already lost): the Session reports nothing after it. It
	// is called while the Session holds its internal lock, from
	// go-zookeeper's event delivery, the watchdog, or Close's caller.
	SessionState(from, to ConnState, cause error)

	// StaleRejected is called when a fence.Guard rejects a write carrying a
	// stale token. The Session never calls it by itself: fence has no
	// dependency on this package, so wire it at the resource with
	// guard.OnStale = m.StaleRejected (called on the writer's goroutine,
	// outside the Guard's locks).
	StaleRejected(e *fence.StaleError)
}
