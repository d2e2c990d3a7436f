package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Node kinds of the read-write lock ("_c_<guid>-write-<sequence>",
// "_c_<guid>-read-<sequence>"; a downgrade's read: "read-@<write seq>@<seq>").
const (
	WriteKind = "write-"
	ReadKind  = "read-"
)

// RWMutex is a distributed read-write lock: the ZooKeeper recipes page's
// "Shared Locks", shaped as Curator's InterProcessReadWriteLock. Readers
// share it, a writer excludes everybody; all queue FIFO in one directory, so
// no stream of readers starves a queued writer. Tokens follow queue order
// (docs/recipes.md#read-write-lock-mutexnewrw). Upgrade (read to write) is
// not offered: it deadlocks every queue lock. Safe for concurrent use.
type RWMutex struct {
	q     *zookeeper.Queue
	path  string
	data  []byte
	read  *RWSide
	write *RWSide
}

// RWSide is one side of an RWMutex: a recipe.Lock, each Acquire a contender.
type RWSide struct {
	rw   *RWMutex
	kind string
}

var _ recipe.Lock = (*RWSide)(nil)

// NewRW returns a read-write lock over the directory path on session s. It
// performs no ZooKeeper operation. Errors: as New; the path must also leave
// room for Downgrade's multi (two paths and the data) in the packet limit.
func NewRW(s *zookeeper.Session, path string, opts ...Option) (*RWMutex, error) {
	q, err := zookeeper.NewQueue(s, path, []string{WriteKind, ReadKind}, RWRule, zookeeper.AllowsAnchors(WriteKind))
	if err != nil {
		return nil, err
	}
	c, err := buildConfig(q, opts)
	if err != nil {
		return nil, err
	}
	rw := &RWMutex{q: q, path: path, data: c.data}
	rw.read = &RWSide{rw: rw, kind: ReadKind}
	rw.write = &RWSide{rw: rw, kind: WriteKind}
	return rw, nil
}

// RWRule is the read-write lock's zookeeper.Rule: a writer holds when first
// (zookeeper.FirstHolds); a reader waits, watching the nearest one, while a
// write node is ahead of it other than the one it is anchored to by Downgrade.
func RWRule(nodes []zookeeper.NodeName, self int) (bool, []int) {
	me := nodes[self]
	if me.Kind == WriteKind {
		return zookeeper.FirstHolds(nodes, self)
	}
	for i := self - 1; i >= 0; i-- {
		n := nodes[i]
		if n.Kind == WriteKind && !(me.Anchored && !n.Anchored && n.Seq == me.Anchor) {
			return false, []int{i}
		}
	}
	return true, nil
}

// ReadLock returns the read side: shared among readers, excluded by a writer.
func (rw *RWMutex) ReadLock() *RWSide { return rw.read }

// WriteLock returns the write side: exclusive.
func (rw *RWMutex) WriteLock() *RWSide { return rw.write }

// Path returns the lock directory (relative to the session's chroot).
func (rw *RWMutex) Path() string { return rw.path }

// Downgrade takes the read side for the holder of write (a live write lease
// of rw) without waiting: the read node is created in one multi with a check
// that the write node exists, takes its place in the queue and carries its
// token (case C13). Release write afterwards to let other readers in.
// Errors: recipe.ErrBadOption when write is not a write lease of rw;
// recipe.ErrLeaseLost when write has ended or its node is gone;
// zookeeper.ErrSequenceLimit at the directory's sequence limit (write still
// held, nothing created: docs/design.md#the-sequence-limit); else as Acquire.
func (rw *RWMutex) Downgrade(ctx context.Context, write recipe.Lease) (recipe.Lease, error) {
	return rw.q.AcquireAnchored(ctx, ReadKind, rw.data, write)
}

// Participants lists readers and writers in queue order (see Participant.Kind),
// as Mutex.Participants; a downgraded read follows its write.
func (rw *RWMutex) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return rw.q.Participants(ctx)
}

// Acquire blocks until the caller holds this side, ctx ends, or the lock
// can no longer be obtained. Token and errors: as Mutex.Acquire.
func (l *RWSide) Acquire(ctx context.Context) (recipe.Lease, error) {
	return l.rw.q.Acquire(ctx, l.kind, l.rw.data)
}

// TryAcquire takes this side only if it can be granted now, else returns an
// error matching recipe.ErrLocked, leaving no znode. Other errors as Acquire.
func (l *RWSide) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return l.rw.q.TryAcquire(ctx, l.kind, l.rw.data)
}
