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
// (case C14). Every client of a directory must use the same limit: store it
// with the directory (StoredLimit, OpenSemaphore) to have that checked.
// Holders' tokens differ: fence per holder key, not with one Guard
// (docs/recipes.md#counting-semaphore-mutexnewsemaphores-path-n).
type Semaphore struct {
	q      *zookeeper.Queue
	path   string
	data   []byte
	leases int
	stored *storedLimit // StoredLimit or OpenSemaphore; nil otherwise
}

var _ recipe.Lock = (*Semaphore)(nil)

// NewSemaphore returns a semaphore of leases holders over the directory path
// on session s, without any ZooKeeper operation; with StoredLimit, leases
// is checked against the limit stored in the directory. Errors:
// recipe.ErrBadOption for leases < 1 (or over MaxLimit with StoredLimit);
// otherwise as New.
func NewSemaphore(s *zookeeper.Session, path string, leases int, opts ...SemaphoreOption) (*Semaphore, error) {
	if leases < 1 {
		return nil, fmt.Errorf("%w: a semaphore needs at least one lease, got %d", recipe.ErrBadOption, leases)
	}
	var c config
	for _, o := range opts {
		if o != nil {
			o.applySemaphore(&c)
		}
	}
	if c.stored {
		return newStored(s, path, leases, opts)
	}
	q, err := zookeeper.NewQueue(s, path, []string{SemaphoreKind}, SemaphoreRule(leases), zookeeper.GrantsLowest())
	if err != nil {
		return nil, err
	}
	if err := q.CheckNodeData(c.data); err != nil {
		return nil, fmt.Errorf("WithData: %w", err)
	}
	return &Semaphore{q: q, path: path, data: c.data, leases: leases}, nil
}

// newStored is a semaphore with a stored limit: n, or the one stored when
// n is 0 (OpenSemaphore). Its queue takes its Rule from the directory's
// data (zookeeper.RuleFromDirData).
func newStored(s *zookeeper.Session, path string, n int, opts []SemaphoreOption) (*Semaphore, error) {
	if n != 0 {
		if err := checkLimit(n); err != nil {
			return nil, err
		}
	}
	var c config
	for _, o := range opts {
		if o != nil {
			o.applySemaphore(&c)
		}
	}
	l := &storedLimit{path: path, n: n}
	q, err := zookeeper.NewQueue(s, path, []string{SemaphoreKind}, nil, zookeeper.RuleFromDirData(l.rule))
	if err != nil {
		return nil, err
	}
	if err := q.CheckNodeData(c.data); err != nil {
		return nil, fmt.Errorf("WithData: %w", err)
	}
	if l.node, err = zookeeper.NewValueNode(s, path); err != nil {
		return nil, err
	}
	l.q = q
	return &Semaphore{q: q, path: path, data: c.data, leases: n, stored: l}, nil
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

// Leases returns the most holders the semaphore grants at a time. For
// OpenSemaphore's, the stored limit its last Acquire or TryAcquire
// decided under (0 before the first).
func (s *Semaphore) Leases() int {
	if s.stored != nil && s.stored.n == 0 {
		return int(s.stored.seen.Load())
	}
	return s.leases
}

// Path returns the semaphore directory (relative to the session's chroot).
func (s *Semaphore) Path() string { return s.path }

// Acquire blocks until the caller holds one lease, ctx ends, or a lease can
// no longer be obtained; each call is one contender. As Mutex.Acquire; with
// a stored limit, also ErrLimitMismatch and ErrBadLimit (no node left), and
// the reads and writes of docs/recipes.md#a-stored-limit.
func (s *Semaphore) Acquire(ctx context.Context) (recipe.Lease, error) {
	if s.stored != nil {
		return s.stored.acquire(ctx, s.q, s.data, true)
	}
	return s.q.Acquire(ctx, SemaphoreKind, s.data)
}

// TryAcquire takes a lease only if fewer than Leases nodes are ahead of its
// own after its create, else returns an error matching recipe.ErrLocked,
// leaving no znode. Calls in flight count as contenders, so a burst can fail
// while a permit frees a moment later. Other errors as Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	if s.stored != nil {
		return s.stored.acquire(ctx, s.q, s.data, false)
	}
	return s.q.TryAcquire(ctx, SemaphoreKind, s.data)
}

// Participants lists holders and waiters in queue order: the first Leases
// entries hold. Operations and errors: as Mutex.Participants.
func (s *Semaphore) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return s.q.Participants(ctx)
}
