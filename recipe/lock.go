package recipe

import (
	"context"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Lock is a distributed lock of any backend: a Mutex, a side of an RWMutex
// or a Semaphore of package mutex, etcdlock, pglock, redislock or memlock
// (testkit/locktest checks an implementation). Each Acquire is an independent
// contender, not reentrant: a second Acquire of an exclusive lock by its
// holder waits for the first grant's Release. No sync.Locker adapter is
// offered (docs/recipes.md#not-offered-and-why).
type Lock interface {
	// Acquire blocks until the caller holds the lock, ctx ends (the error
	// matches ctx's cause), or ownership can't be obtained (ErrSessionLost,
	// ErrSessionClosed, ...). An error leaves nothing behind: no request of
	// the attempt can still create an entry, and any entry it created is
	// gone (after a bounded wait ignoring ctx, or past an outage later, as
	// each backend states).
	Acquire(ctx context.Context) (Lease, error)
	// TryAcquire returns a Lease if the lock (a permit) is free right now,
	// else an error matching ErrLocked; it never waits for a holder, and a
	// "not acquired" leaves nothing behind.
	TryAcquire(ctx context.Context) (Lease, error)
}

// Lease is one grant of a Lock: a lease, not a mutex. Ownership can end at
// any moment without the holder doing anything, and a paused holder can
// resume after it ended: guard every effect with Token at the resource
// (package fence), and stop work when Context is done.
type Lease interface {
	// Token is the fencing token of this grant: larger than the token of
	// every earlier grant of the same lock.
	Token() fence.Token
	// Context is done as soon as ownership is released or in doubt, with a
	// cause matching ErrReleased, ErrSuspended, ErrSessionLost,
	// ErrSessionClosed or ErrNodeDeleted. It is not derived from Acquire's
	// ctx (it keeps its values only).
	Context() context.Context
	// Release gives the lock up: it ends Context (cause ErrReleased), then
	// removes the grant even if ctx is done, within a bound the backend
	// states; what is not done by then is done later, in the background or by
	// the server's expiry. A completed removal returns nil. Release is
	// idempotent and serialized: after the grant is removed, calls return
	// nil; after an error that left it, a call tries again. Errors:
	// ErrLeaseLost (wrapping the cause) if ownership ended before Release
	// (nothing is removed then); an *OpError if the removal is unconfirmed.
	// A nil ctx counts as context.Background().
	Release(ctx context.Context) error
}
