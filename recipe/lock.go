package recipe

import (
	"context"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Lock is a distributed lock (or one side of a read-write lock, or a
// semaphore) of any backend: package mutex on ZooKeeper (Mutex, the sides
// of an RWMutex, Semaphore), backend/etcdlock, backend/pglock,
// backend/redislock and recipe/memlock implement it, and recipe/locktest
// checks an implementation against this contract. (ZooKeeper's elections
// and leader latches grant Leases too.)
//
// Each Acquire call is an independent contender (not reentrant): a second
// Acquire of an exclusive lock while the caller still holds it waits for
// that grant's Release, so from one goroutine it waits until its ctx ends,
// as sync.Mutex would deadlock. No sync.Locker adapter is offered: Lock()
// and Unlock() have no error and no context to say that the lock could not
// be taken or that ownership was lost meanwhile, which a lease must be able
// to say.
type Lock interface {
	// Acquire blocks until the caller holds the lock, ctx ends (the error
	// matches ctx's cause), or ownership can't be obtained (ErrSessionLost,
	// ErrSessionClosed, ...). An error leaves nothing behind: no request of
	// the attempt can still create an entry, and the entry it created, if
	// any, is gone (each backend states the bounded wait, ignoring ctx, that
	// this takes, and the outage past which the removal happens later).
	Acquire(ctx context.Context) (Lease, error)
	// TryAcquire returns a Lease if the lock (a permit, for a semaphore) is
	// free right now, or an error matching ErrLocked if other holders have
	// it; it never waits for a holder, and a "not acquired" answer leaves
	// nothing behind.
	TryAcquire(ctx context.Context) (Lease, error)
}

// Lease is one grant of a Lock. It is a lease, not a mutex: ownership can end
// at any moment without the holder doing anything (its session lost or
// suspended, an operator deleting the lock's entry), and a holder that
// pauses (GC, swap, a frozen VM) can resume after it ended. Guard every
// effect with Token at the resource (package fence), and stop work when
// Context is done.
type Lease interface {
	// Token is the fencing token of this grant: larger than the token of
	// every earlier grant of the same lock.
	Token() fence.Token
	// Context is done as soon as ownership is released or in doubt; it is not
	// derived from Acquire's context (it keeps its values only).
	// context.Cause tells why, with an error matching ErrReleased,
	// ErrSuspended, ErrSessionLost, ErrSessionClosed or ErrNodeDeleted.
	Context() context.Context
	// Release gives the lock up: it ends Context first (cause ErrReleased),
	// then removes the grant, even if ctx is already done, within a bound
	// the backend states (retrying on connection loss where it can); a removal not
	// completed by then is completed later, in the background or by the
	// server when the grant's session or key expires. A removal that
	// completes is a success (nil), whatever ctx has become.
	//
	// It is idempotent and serialized: once the grant is removed, or
	// nothing is left to remove, later calls return nil; after an error
	// that left the grant in place, a later call tries again. Errors:
	// ErrLeaseLost (wrapping the cause) if ownership ended before Release
	// (nothing is removed by Release then); an *OpError if the removal
	// could not be confirmed.
	Release(ctx context.Context) error
}
