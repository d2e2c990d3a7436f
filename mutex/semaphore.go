package mutex

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// SemaphoreKind is the node kind of semaphore znodes ("_c_<guid>-lease-<seq>").
const SemaphoreKind = "lease-"

// Semaphore is a distributed counting semaphore: at most Leases holders at
// any instant, granted FIFO, each with its own lease. It has the role of
// Curator's InterProcessSemaphoreV2, without its internal lock: a node holds
// while fewer than Leases nodes are ahead of it, so it never over-grants
// (case C14). Every client of a directory must use the same limit (it is not
// stored). Holders' tokens differ: fence per holder key, not with one Guard
// (docs/recipes.md#counting-semaphore-mutexnewsemaphores-path-n).
type Semaphore struct {
	q      *zookeeper.Queue
	path   string
	data   []byte
	leases int
}

var _ recipe.Lock = (*Semaphore)(nil)

// NewSemaphore returns a semaphore of leases holders over the directory path
// on session s. Errors: recipe.ErrBadOption for leases < 1; otherwise as New.
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
	return &Semaphore{q: q, path: path, data: c.data, leases: leases}, nil
}

// SemaphoreRule is the zookeeper.Rule of a semaphore of n leases: a node
// holds below index n and watches the n nodes right ahead of it (exported
// for tools such as zkrecipes inspect).
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
func (s *Semaphore) Path() string { return s.path }

// Acquire blocks until the caller holds one lease, ctx ends, or a lease can
// no longer be obtained; each call is one contender. As Mutex.Acquire.
func (s *Semaphore) Acquire(ctx context.Context) (recipe.Lease, error) {
	return s.q.Acquire(ctx, SemaphoreKind, s.data)
}

// TryAcquire takes a lease only if fewer than Leases nodes are ahead of its
// own after its create, else returns an error matching recipe.ErrLocked,
// leaving no znode. Calls in flight count as contenders, so a burst can fail
// while a permit frees a moment later. Other errors as Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return s.q.TryAcquire(ctx, SemaphoreKind, s.data)
}

// Participants lists holders and waiters in queue order: the first Leases
// entries hold. Operations and errors: as Mutex.Participants.
func (s *Semaphore) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return s.q.Participants(ctx)
}
