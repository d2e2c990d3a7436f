package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Node kinds of the read-write lock: its znodes are named
// "_c_<guid>-write-<sequence>" and "_c_<guid>-read-<sequence>"; a read
// taken by downgrade is "_c_<guid>-read-@<writer's sequence>@<sequence>".
const (
	WriteKind = "write-"
	ReadKind  = "read-"
)

// RWMutex is a distributed read-write lock rooted at one znode path: the
// "Shared Locks" recipe of the ZooKeeper recipes page, with the shape of
// Curator's InterProcessReadWriteLock. Readers and writers queue in one
// directory, in FIFO order:
//   - a writer holds when its node is first, and watches its immediate
//     predecessor;
//   - a reader holds when no write node is ahead of it, and watches only the
//     nearest write node ahead of it.
//
// So readers share the lock, a writer excludes everybody, and a stream of
// readers never starves a queued writer: a reader that arrives after a
// waiting writer queues behind it.
//
// Downgrade (Curator allows a write holder to take the read lock): the read
// node it creates takes the writer's place in the queue, so a writer that
// queued meanwhile still waits for the read to end (case C13). Upgrade (read
// to write) is not supported: it deadlocks in every queue-based lock.
//
// Fencing tokens: each grant's token is the czxid of its own node, so tokens
// follow queue order: a grant that could only be made after another grant
// ended (a write after anything ahead of it, a read after the write ahead
// of it) has the larger token. A read taken by Downgrade carries the
// write's token (it holds the write's place), so a writer queued behind it
// still has a larger one. Concurrent readers hold different tokens;
// fence a resource's writes with the write side's tokens (package fence),
// and give readers a token check only where a read has effects.
//
// Node names interoperate with no other library; foreign children of the
// directory are ignored, but another recipe's nodes of this module (a
// mutex's, a semaphore's) make an acquisition fail with
// recipe.ErrMixedRecipes. An RWMutex is safe for concurrent use.
type RWMutex struct {
	q     *zookeeper.Queue
	data  []byte
	read  *RWSide
	write *RWSide
}

// RWSide is one side (read or write) of an RWMutex. It implements
// recipe.Lock; each Acquire call is an independent contender.
type RWSide struct {
	rw   *RWMutex
	kind string
}

var _ recipe.Lock = (*RWSide)(nil)

// NewRW returns a read-write lock over the directory path on session s
// (relative to the session's chroot). It performs no ZooKeeper operation.
// Errors: as New (recipe.ErrInvalidPath, recipe.ErrBadOption,
// recipe.ErrTooLarge, recipe.ErrSessionClosed). The packet limit is
// checked for Downgrade's request too (a multi carrying two paths and the
// data), so a path that fits a mutex may be too long for a read-write lock.
func NewRW(s *zookeeper.Session, path string, opts ...Option) (*RWMutex, error) {
	q, err := zookeeper.NewQueue(s, path, []string{WriteKind, ReadKind}, RWRule, zookeeper.AllowsAnchors(WriteKind))
	if err != nil {
		return nil, err
	}
	c, err := buildConfig(q, opts)
	if err != nil {
		return nil, err
	}
	rw := &RWMutex{q: q, data: c.data}
	rw.read = &RWSide{rw: rw, kind: ReadKind}
	rw.write = &RWSide{rw: rw, kind: WriteKind}
	return rw, nil
}

// RWRule is the read-write lock's zookeeper.Rule, for both kinds. A writer is
// an exclusive lock (zookeeper.FirstHolds). A reader waits while a write node
// is ahead of it, except the write node it was anchored to by a downgrade
// (held by the same caller); the nearest such write node is the one to
// watch: while it exists, the answer stays "wait". Tools that show who
// holds a lock (zkrecipes inspect) apply it to a listing.
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

// ReadLock returns the read side: shared among readers, excluded by a
// writer.
func (rw *RWMutex) ReadLock() *RWSide { return rw.read }

// WriteLock returns the write side: exclusive.
func (rw *RWMutex) WriteLock() *RWSide { return rw.write }

// Path returns the lock directory (relative to the session's chroot).
func (rw *RWMutex) Path() string { return rw.q.Dir() }

// Downgrade takes the read side for the holder of write, a live lease of
// this RWMutex's write side, without waiting and without losing the
// writer's place: the read node is anchored to the write node (see the
// type's doc), and the read lease's token is the write lease's. Release
// write afterwards to let other readers in; a writer that queued meanwhile
// waits for the read to be released too (case C13). The read node is
// created in one multi with a check that the write node exists (see
// docs/design.md#acquisition).
//
// Errors: recipe.ErrBadOption when write is not a write lease of this
// RWMutex; an error matching recipe.ErrLeaseLost when write has ended or its
// node is gone; zookeeper.ErrSequenceLimit when the lock directory's sequence
// counter has reached its limit (docs/design.md#the-sequence-limit: write is
// still held, nothing was created; release it and take the read side);
// otherwise as Acquire.
func (rw *RWMutex) Downgrade(ctx context.Context, write recipe.Lease) (recipe.Lease, error) {
	return rw.q.AcquireAnchored(ctx, ReadKind, rw.data, write)
}

// Participants lists the readers and writers in queue order (kind in
// Participant.Kind). A read taken by Downgrade is listed right after its
// write, with its own node's czxid as Token (its lease's Token is the
// write's). ZooKeeper operations: getChildren, then getData per
// znode. Errors: recipe.ErrMixedRecipes when the directory holds another
// recipe's nodes; *recipe.OpError, recipe.ErrSessionClosed, ctx's cause.
func (rw *RWMutex) Participants(ctx context.Context) ([]zookeeper.Participant, error) {
	return rw.q.Participants(ctx)
}

// Acquire blocks until the caller holds this side, ctx ends, or the lock
// can no longer be obtained: a writer watches its immediate predecessor, a
// reader the nearest write node ahead (the ZooKeeper operations:
// docs/design.md#acquisition). The Lease's Token is the czxid of the
// caller's znode; its Context is done when ownership ends.
//
// Errors: ctx's cause (nothing left behind), recipe.ErrSessionLost,
// recipe.ErrNodeDeleted, recipe.ErrSessionClosed, recipe.ErrMixedRecipes,
// *recipe.OpError (matching recipe.ErrNoPermission on ACL refusals).
func (l *RWSide) Acquire(ctx context.Context) (recipe.Lease, error) {
	return l.rw.q.Acquire(ctx, l.kind, l.rw.data)
}

// TryAcquire takes this side only if it can be granted now; otherwise it
// returns an error matching recipe.ErrLocked and leaves no znode behind.
// Other errors as Acquire.
func (l *RWSide) TryAcquire(ctx context.Context) (recipe.Lease, error) {
	return l.rw.q.TryAcquire(ctx, l.kind, l.rw.data)
}
