package mutex

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// SemaphoreKind is the node kind of semaphore znodes: their names are
// "_c_<guid>-lease-<sequence>".
const SemaphoreKind = "lease-"

// Semaphore is a distributed counting semaphore: at most a fixed number of
// holders at any instant, each with its own lease. It has the role of
// Curator's InterProcessSemaphoreV2, built differently: there is no
// internal lock and no children watch. Contenders queue in one directory
// (FIFO); a node holds while fewer than the limit nodes are ahead of it,
// and a waiter watches the limit nodes right ahead of it (while they all
// exist, at least limit nodes are ahead, so no grant is missed). A release
// wakes at most limit waiters, never the whole queue.
//
// Why it never over-grants, also when many clients call TryAcquire at once
// (case C14) or a create's reply is lost: a node's index in the queue only
// ever decreases (nodes join at the end, and leave), so a node granted at
// an index below the limit stays below it; at any instant the holders are
// among the first limit nodes. Every contender creates its node first and
// decides from a listing taken after its create, which includes every node
// ahead of it. A create whose reply was lost is found by its GUID and
// adopted, never doubled.
//
// The limit is not stored in ZooKeeper: every client of one directory must
// use the same limit (a client with a larger one could grant beyond the
// smaller). Fencing tokens follow queue order, not grant time: each
// holder's token is the czxid of its own node, so a node that waited behind
// another can be granted first (two permits freed at once) with the larger
// token. Concurrent holders hold different
// tokens, so a fence.Guard that keeps only the highest token would reject
// legitimate concurrent holders: fence a semaphore-protected resource per
// permit-holder key, or use the tokens for identity and auditing.
type Semaphore struct {
	q      *zookeeper.Queue
	data   []byte
	leases int
}

var _ recipe.Lock = (*Semaphore)(nil)

// NewSemaphore returns a counting semaphore over the directory path on
// session s (relative to the session's chroot) that grants at most leases
// holders at a time. It performs no ZooKeeper operation. Errors:
// recipe.ErrBadOption for leases < 1; otherwise the errors of New
// (recipe.ErrInvalidPath, recipe.ErrTooLarge, recipe.ErrSessionClosed, ...).
func NewSemaphore(s *zookeeper.Session, path string, leases int, opts ...Option) (*Semaphore, error) {
	if leases < 1 {
		return nil, fmt.Errorf("%w: a semaphore needs at least one lease, got %d", recipe.ErrBadOption, leases)
	}
	q, err := zookeeper.NewQueue(s, path, []string{SemaphoreKind}, SemaphoreRule(leases), zookeeper.GrantsLowest())
	if err != nil {
		return nil, err
	}
	c, err := buildConfig(q, opts)
	if err != nil {
		return nil, err
	}
	return &Semaphore{q: q, data: c.data, leases: leases}, nil
}

// SemaphoreRule is the zookeeper.Rule of a semaphore of n leases: a node holds
// below index n and watches the n nodes right ahead of it. Tools that show
// who holds a semaphore (zkrecipes inspect) apply it to a listing.
func SemaphoreRule(n int) zookeeper.Rule {
	return func(_ []zookeeper.NodeName, self int) (bool, []int) {
		if self < n {
			return true, nil
		}
		watch := make([]int, n)
		for i := range watch {
			watch[i] = self - n + i
		}
		return false, watch
	}
}

// Leases returns the most holders the semaphore grants at a time.
func (s *Semaphore) Leases() int { return s.leases }

// Path returns the semaphore directory (relative to the session's chroot).
func (s *Semaphore) Path() string { return s.q.Dir() }

// Acquire blocks until the caller holds one lease, ctx ends, or a lease can
// no longer be obtained. Each call is one contender and gets its own Lease
// (token: the czxid of its node); a waiter watches the Leases nodes right
// ahead of it (the ZooKeeper operations: docs/design.md#acquisition).
//
// Errors: ctx's cause (nothing left behind), recipe.ErrSessionLost,
// recipe.ErrNodeDeleted, recipe.ErrSessionClosed, recipe.ErrMixedRecipes
// (the directory holds another recipe's nodes), *recipe.OpError (matching
// recipe.ErrNoPermission on ACL refusals).
func (s *Semaphore) Acquire(ctx context.Context) (recipe.Lease, error) {
	return s.q.Acquire(ctx, SemaphoreKind, s.data)
}

// TryAcquire takes a lease only if fewer than Leases nodes are ahead of its
// own node in the listing right after its create; otherwise it returns an
// error matching recipe.ErrLocked and leaves no znode behind. Other
// TryAcquire and Acquire calls in flight count as contenders: under a burst
// of simultaneous TryAcquire calls, some fail although a permit is free a
// moment later (never more than Leases succeed). Use Acquire with a short
// deadline to wait briefly instead. Other errors as Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return s.q.TryAcquire(ctx, SemaphoreKind, s.data)
}

// Participants lists holders and waiters in queue order: the first Leases
// entries hold (as of the listing). ZooKeeper operations: getChildren, then
// getData per znode. Errors: recipe.ErrMixedRecipes when the directory
// holds another recipe's nodes (a mutex's, say: none of them would be
// listed); *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (s *Semaphore) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return s.q.Participants(ctx)
}
