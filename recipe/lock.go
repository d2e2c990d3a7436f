package recipe

import (
	"context"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Lock is a backend-neutral distributed lock (or one side of a read-write
// lock, or a semaphore). Nothing in it names ZooKeeper: another backend can
// implement it and be checked by the same tests.
//
// Each Acquire call is an independent contender (not reentrant): calling
// Acquire twice from one goroutine without releasing deadlocks, as with
// sync.Mutex.
//
// No sync.Locker adapter is offered, on purpose: Lock() has no error and no
// context to say that the lock could not be taken, and Unlock() none to
// say that ownership was lost meanwhile, which a lease must be able to say
// (see Lease). Code written against sync.Locker assumes the lock is held
// from Lock until Unlock, which no distributed lock can promise.
type Lock interface {
	// Acquire blocks until the caller holds the lock, ctx ends (the error
	// matches ctx's cause; nothing is left behind), or ownership can't be
	// obtained (e.g. ErrSessionLost, ErrSessionClosed). When it returns an
	// error, no request of the attempt can still create an entry, and the
	// entry it created, if any, is gone: for the ZooKeeper recipes it waits
	// for that, ignoring ctx, up to 250 ms for a create in flight and 250 ms
	// for the delete. Only with the connection down past that is an entry
	// removed later (by the session's cleaner on reconnection, or when the
	// create in flight lands), or with the session.
	Acquire(ctx context.Context) (Lease, error)
	// TryAcquire returns a Lease if the lock is free right now, or an error
	// matching ErrLocked if another holder has it; it never waits for a
	// holder, and a "not acquired" answer leaves nothing behind.
	TryAcquire(ctx context.Context) (Lease, error)
}

// Lease is one grant of a Lock. It is a lease, not a mutex: ownership can end
// at any moment without the holder doing anything (session loss, suspension,
// an operator deleting the lock node), and a holder that pauses (GC, swap, a
// frozen VM) can resume after it ended. Guard every effect with Token at the
// resource (package fence), and stop work when Context is done.
type Lease interface {
	// Token is the fencing token of this grant: larger than the token of
	// every earlier grant of the same lock.
	Token() fence.Token
	// Context is done as soon as ownership is released or in doubt; it is not
	// derived from Acquire's context (it keeps its values only).
	// context.Cause tells why: ErrReleased, ErrSuspended, ErrSessionLost,
	// ErrSessionClosed or ErrNodeDeleted. A deletion of the lock node by
	// someone else is seen at its watch event or, for a ZooKeeper lease
	// whose watch on its directory stood in for one on its node, one read
	// after it (docs/design.md#the-child-watch-stand-in).
	Context() context.Context
	// Release gives the lock up. It ends Context first (cause ErrReleased),
	// then removes the grant (for the ZooKeeper recipes, a delete of the
	// lease's znode by version: see docs/design.md#acquisition). The removal
	// ignores ctx's cancellation: it is made even if ctx is already done,
	// and retried on connection loss until shortly after ctx ends (250 ms
	// for the ZooKeeper recipes) or the session's cleanup timeout (default:
	// the session timeout) passes; one not completed by then is handed to
	// the session's cleaner, which retries on reconnection. A removal that
	// completes is a success (nil), whatever ctx has become.
	//
	// It is idempotent and can be retried after an error; concurrent calls
	// are serialized. Errors: ErrLeaseLost (wrapping the cause) if ownership
	// ended before Release (nothing is deleted by Release then); a connection
	// error, ctx's error or context.DeadlineExceeded (cleanup timeout) in an
	// *OpError if the delete could not be confirmed; ErrNoPermission if the
	// ACL forbids the delete.
	Release(ctx context.Context) error
}

// NodeLease is a Lease that names its node: every lease of this module's
// ZooKeeper recipes (mutex, read-write lock, semaphore, latch, election)
// is one. Path is what tools and tests use to find the grant's znode.
type NodeLease interface {
	Lease
	// Path returns the lease's znode, relative to the session's chroot.
	Path() string
}

var _ NodeLease = (*lease)(nil)
