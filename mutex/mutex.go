// Package mutex provides fenced, session-bound distributed locks on
// ZooKeeper: an exclusive Mutex, a read-write lock (NewRW) and a counting
// semaphore (NewSemaphore). A grant is a recipe.Lease: its Context ends the
// moment ownership is in doubt, and its Token (the lock znode's czxid) is
// larger than every earlier grant's, for the resource to reject a paused
// former holder (package fence). An error never leaves a znode behind.
// WithLockDelay keeps the Mutex from everyone for a while after a holder
// ended without a Release, for resources that cannot check a token.
//
//	m, err := mutex.New(s, "/locks/nightly-report")
//	lease, err := m.Acquire(ctx)
//	defer lease.Release(context.Background())
//	err = guard.Do("report", lease.Token(), write) // stop when lease.Context() ends
//
// The recipe is the ZooKeeper recipes page's "Locks", as Curator's
// InterProcessMutex implements it (docs/recipes.md). The session needs
// CREATE and DELETE on the directory; keep the directory for one lock
// (docs/recipes.md#paths-permissions-and-foreign-nodes).
package mutex

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Kind is the node kind of a Mutex's znodes ("_c_<guid>-lock-<sequence>").
const Kind = "lock-"

// Mutex is a distributed exclusive lock (a recipe.Lock). Each Acquire is an
// independent FIFO contender (not reentrant). Safe for concurrent use. Make
// it with New: the zero value is not usable.
type Mutex struct {
	q    *zookeeper.Queue
	path string
	data []byte
}

// config is what the options of this package set.
type config struct {
	data   []byte
	delay  time.Duration // WithLockDelay (New only)
	stored bool          // StoredLimit (NewSemaphore only)
}

var _ recipe.Lock = (*Mutex)(nil)

// Option configures New, NewRW and NewSemaphore (New takes MutexOptions,
// which every Option is).
type Option func(*config)

// WithData stores data in every znode the lock creates (for example a host
// name or process id), visible to Participants and to operators. Default:
// none. At most zookeeper.MaxNodeData bytes, and small enough for the create
// to fit the session's packet limit with the path (the constructors check).
func WithData(data []byte) Option {
	return func(c *config) { c.data = slices.Clone(data) }
}

// buildConfig applies the options (nil ones are skipped) and checks them.
func buildConfig[O MutexOption](q *zookeeper.Queue, opts []O) (config, error) {
	var c config
	for _, o := range opts {
		if MutexOption(o) != nil {
			o.applyMutex(&c)
		}
	}
	if err := q.CheckNodeData(c.data); err != nil {
		return c, fmt.Errorf("WithData: %w", err)
	}
	return c, nil
}

// New returns a Mutex over the lock directory path (relative to the
// session's chroot) on session s, without any ZooKeeper operation. Errors: a
// *zookeeper.PathError matching recipe.ErrInvalidPath for a path ZooKeeper
// refuses, "/", one under /zookeeper, one with a segment named like a queue
// node or "_lock-delay" (also zookeeper.ErrReservedName; see package
// zookeeper's Paths), or one too long for the packet limit (also
// recipe.ErrTooLarge); recipe.ErrBadOption for a nil session or a
// WithLockDelay out of range; recipe.ErrTooLarge for data that does not fit
// (and recipe.ErrBadOption over zookeeper.MaxNodeData);
// recipe.ErrSessionClosed.
func New(s *zookeeper.Session, path string, opts ...MutexOption) (*Mutex, error) {
	q, err := zookeeper.NewQueue(s, path, []string{Kind}, zookeeper.FirstHolds, zookeeper.GrantsLowest())
	if err != nil {
		return nil, err
	}
	c, err := buildConfig(q, opts)
	if err != nil {
		return nil, err
	}
	if err := checkDelay(c); err != nil {
		return nil, err
	}
	if c.delay > 0 {
		zkside.QueueOf(q).SetLockDelay(c.delay)
	}
	return &Mutex{q: q, path: path, data: c.data}, nil
}

// Path returns the lock directory (relative to the session's chroot).
func (m *Mutex) Path() string { return m.path }

// Acquire blocks until the caller holds the lock, ctx ends, or the lock can
// no longer be obtained (docs/design.md#acquisition). The Lease's Token is
// the czxid of the caller's znode. Errors: ctx's cause (nothing left behind,
// case C5), recipe.ErrSessionLost, recipe.ErrNodeDeleted,
// recipe.ErrSessionClosed, recipe.ErrMixedRecipes, *recipe.OpError
// (matching recipe.ErrNoPermission on ACL refusals).
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) {
	return m.q.Acquire(ctx, Kind, m.data)
}

// TryAcquire takes the lock only if it is free now (Curator's acquire(0)),
// else returns an error matching recipe.ErrLocked, leaving no znode (C6).
// Tight TryAcquire loops from many sessions mostly refuse each other: back
// off with jitter, or Acquire with a deadline. Other errors as Acquire.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return m.q.TryAcquire(ctx, Kind, m.data)
}

// Participants lists the contenders in grant order, the holder first
// (getChildren, then getData per znode). Errors: recipe.ErrMixedRecipes,
// *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (m *Mutex) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return m.q.Participants(ctx)
}
