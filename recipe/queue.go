package recipe

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
)

// Rule is a recipe's whole policy on top of the queue engine: given the
// ordered, parsed listing of a queue directory and the index of the caller's
// own node in it, it says whether that node holds a grant and, if not, the
// indexes of the nodes whose deletion could change the answer (the nodes to
// watch; at least one). A mutex holds at index 0 and watches self-1; a read
// lock watches the nearest write node before it; an N-permit semaphore holds
// below index N and watches the N nodes before it. Rules are pure functions
// of the listing. The engine re-lists on every wakeup, so a Rule only needs
// to name enough nodes that no grant is missed: whenever the answer for the
// current listing is "wait", it must stay "wait" while all watched nodes
// exist.
type Rule func(nodes []NodeName, self int) (holds bool, watch []int)

// FirstHolds is the Rule of an exclusive lock: the lowest node holds; every
// other node watches its immediate predecessor.
func FirstHolds(_ []NodeName, self int) (bool, []int) {
	if self == 0 {
		return true, nil
	}
	return false, []int{self - 1}
}

// MaxNodeData is the most data a queue node may carry, in bytes: a
// participant's data is read by every Participants call and by observers
// of the queue head, so it is meant to be small (a host name, an address).
// The create that carries it must also fit the session's packet limit
// (WithMaxPacket) together with the node's path: data over MaxNodeData, or
// too large for the packet limit with the path, is refused before anything
// is sent (ErrTooLarge; ErrBadOption too over MaxNodeData).
const MaxNodeData = 512 << 10

// Queue is the ephemeral-sequential queue engine that every recipe of this
// module drives; it follows the ZooKeeper recipes page ("Locks") and has the
// shape of Curator's LockInternals: the recipe supplies a Rule, the engine
// does the creating, waiting, watching, retrying and cleaning up.
//
// What the engine guarantees, whatever the Rule:
//   - Every Acquire creates at most one ephemeral sequential znode, named
//     with a fresh GUID ("protected" names). After a create whose reply was
//     lost, the node is looked up by GUID (after a sync, so a lagging server
//     can't hide it) and adopted only if its ephemeral owner is the current
//     session; otherwise the create is retried.
//   - Missing parents are created as container znodes (which the server
//     removes once empty), and re-created when a directory is deleted
//     between the ensure and the create.
//   - A waiter watches exactly one node (the Rule's choice) with a data
//     watch, which is certain to fire because the watched node is ephemeral,
//     and re-lists the directory on every wakeup: nothing is concluded from
//     an event's type.
//   - Children that don't match the node-name grammar are ignored.
//   - An error return never leaves a node behind: the caller's node is
//     deleted on a context of its own (ignoring the caller's cancellation),
//     with retries on connection loss and an identity check; a delete that
//     can't be completed now is finished by the Session's cleaner on
//     reconnection.
//   - A grant is made only with the node's Stat from the server: its
//     ephemeral owner must be the current session, and its czxid becomes
//     the fencing token. Acquire has it from the create itself (sent as
//     create2); a Ticket's Await and an anchored node read it. The lease
//     holds a watch on its own node, set no later than the state the grant
//     was decided on (a data watch, or for an uncontended Acquire the child
//     watch of its listing: see fastStart), so a deletion by anyone else
//     ends the lease.
type Queue struct {
	s       *Session
	dir     string // as given, relative to the chroot
	adir    string // absolute (chroot prepended)
	kinds   []string
	rule    Rule
	reqSize int      // bounds its requests but for creates' data: queueRequestSize
	pending inflight // creates whose outcome nobody waits for yet
	// solo: the last Acquire's pipelined listing showed its node alone and
	// granted it. The next Acquire's listing then sets a child watch that
	// can stand in for the own-node watch (childSlot). A hint only: a wrong
	// guess costs one event or one read, never correctness.
	solo atomic.Bool
}

// NewQueue returns a queue engine over directory dir (validated with
// ValidatePath) whose nodes are of the given kinds (e.g. "lock-"; non-empty,
// no "/" or "@"), deciding grants with rule. It performs no ZooKeeper
// operation. Errors: ErrInvalidPath (also, together with ErrTooLarge, for
// a path so long that the requests on its nodes would be over the
// session's packet limit: see WithMaxPacket), ErrBadOption,
// ErrSessionClosed (s already closed).
func NewQueue(s *Session, dir string, kinds []string, rule Rule) (*Queue, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil session", ErrBadOption)
	}
	if s.isClosed() {
		return nil, ErrSessionClosed
	}
	if err := ValidatePath(dir); err != nil {
		return nil, err
	}
	if len(kinds) == 0 || rule == nil {
		return nil, fmt.Errorf("%w: a queue needs node kinds and a rule", ErrBadOption)
	}
	for _, k := range kinds {
		if k == "" || strings.ContainsAny(k, "/@\x00") {
			return nil, fmt.Errorf("%w: node kind %q", ErrBadOption, k)
		}
	}
	if err := s.checkQueueDir(dir, s.abs(dir), kinds); err != nil {
		return nil, err
	}
	return &Queue{s: s, dir: dir, adir: s.abs(dir), kinds: slices.Clone(kinds), rule: rule,
		reqSize: s.queueRequestSize(s.abs(dir), kinds)}, nil
}

// Dir returns the queue directory, relative to the session's chroot.
func (q *Queue) Dir() string { return q.dir }

// Session returns the session the queue runs on.
func (q *Queue) Session() *Session { return q.s }

// Acquire joins the queue with a node of the given kind carrying data, and
// blocks until the Rule grants it, ctx ends, or the grant becomes impossible.
//
// ZooKeeper operations: create2 (ephemeral sequential, returning the node's
// Stat: owner check and czxid; plus container creates when the directory is
// missing) with getChildren sent right behind it (with a watch on the
// directory when the previous Acquire of this Queue found it uncontended:
// that watch is then the lease's own-node watch); a getData with watch on
// the own node at a grant made on a listing without that watch; per
// wakeup getChildren (or, when its only predecessor was deleted, a getData
// with watch on the own node instead) and a getData watch on each node the
// Rule names. On a connection loss it also performs sync and getChildren
// to find a create whose reply was lost.
// A connection SUSPENDED while waiting is waited out (the node keeps its
// place); a grant is never made while SUSPENDED.
//
// Errors: ctx's cause when ctx ends; ErrSessionLost when the session that
// owns the node is lost; ErrNodeDeleted when the node is deleted by someone
// else while waiting; ErrSessionClosed; ErrMixedRecipes (the directory holds nodes of other kinds of this module); an *OpError for refusals (matching
// ErrNoPermission for ACLs); ErrBadOption for an unknown kind or data over
// MaxNodeData; ErrTooLarge for data over MaxNodeData or too large for the
// packet limit with the node's path (see CheckNodeData). In every error case the caller's node is deleted (or its
// deletion is queued with the Session's cleaner until reconnection): Acquire
// waits up to 250 ms for that delete after its own failure, even when ctx
// has ended, so it can return that much after ctx's deadline when the server
// does not answer.
func (q *Queue) Acquire(ctx context.Context, kind string, data []byte) (Lease, error) {
	return q.acquire(ctx, kind, data, true, nil)
}

// TryAcquire is Acquire without waiting: if the Rule does not grant the new
// node on the first listing, the node is deleted and the error matches
// ErrLocked. Its own-node watch is set only when it is granted. A "not acquired" answer leaves no node, also across a
// connection blip (the delete is retried, then handed to the cleaner).
func (q *Queue) TryAcquire(ctx context.Context, kind string, data []byte) (Lease, error) {
	return q.acquire(ctx, kind, data, false, nil)
}

// AcquireAnchored is Acquire for a node that takes the queue position of
// anchor, a live Lease granted by a Queue on the same directory and
// session (see the node-name grammar): the read-write lock's downgrade. The
// node is created in one transaction with a check that the anchor's node
// still exists (ZooKeeper operation: multi of check and create), so the
// position it takes was never given to anyone else. The grant's token is
// the anchor's (the czxid of the node whose position it takes): every grant
// behind that position, made after it, has a larger one. Errors: as Acquire, and
// ErrBadOption when anchor is not such a lease, ErrLeaseLost (wrapping the
// cause) when anchor has ended or its node is gone.
//
// The queue must have at least two node kinds (ErrBadOption otherwise),
// and its Rule must let an anchored node hold while its anchor is ahead of
// it (the read-write lock's read rule skips the anchor). A queue of one
// kind is refused because its waiters may grant without re-listing when
// their only predecessor goes (skipRelist): an anchored node taking that
// predecessor's place would be missed. (Under FirstHolds an anchored node
// would also wait for its own anchor, and so for the caller.)
func (q *Queue) AcquireAnchored(ctx context.Context, kind string, data []byte, anchor Lease) (Lease, error) {
	if len(q.kinds) < 2 {
		return nil, fmt.Errorf("%w: anchored nodes need a queue of two or more node kinds (%s has %q)", ErrBadOption, ShortPath(q.dir), q.kinds)
	}
	a, ok := anchor.(*lease)
	if !ok || a == nil || a.s != q.s || path.Dir(a.path) != q.adir {
		return nil, fmt.Errorf("%w: the anchor must be a lease of the same queue directory and session", ErrBadOption)
	}
	if a.ctx.Err() != nil {
		return nil, errorf("%w (%w)", ErrLeaseLost, context.Cause(a.ctx))
	}
	n, ok := ParseNodeName(path.Base(a.path), a.kinds)
	if !ok {
		return nil, fmt.Errorf("%w: anchor node %s", ErrBadOption, ShortPath(a.path))
	}
	return q.acquire(ctx, kind, data, true, &anchorSpec{path: a.path, seq: n.Pos(), token: int64(a.Token())})
}

type anchorSpec struct {
	path  string // absolute
	seq   int32  // the position taken
	token int64  // the anchor's token, which the anchored grant carries
}

func (q *Queue) acquire(ctx context.Context, kind string, data []byte, wait bool, anchor *anchorSpec) (_ Lease, err error) {
	if m := q.s.cfg.metrics; m != nil {
		start := time.Now()
		m.AcquireStarted(metricKind(kind), q.dir)
		defer func() { m.AcquireDone(metricKind(kind), q.dir, time.Since(start), err) }()
	}
	// An anchored create (the read-write lock's downgrade) takes no fast
	// path: it must be the multi of check (the anchor exists) and create, and
	// a create2 inside a multi is not rewritten (trackedConn rewrites only a
	// top-level create request) nor verified to work. Its grant reads the
	// node (grant). Anchored nodes exist only in queues of two or more kinds,
	// where skipRelist never skips.
	// Nor does a queue whose requests may be over the servers' default
	// limit (see packet.go): a listing sent behind a create the servers
	// refuse would be sent again on the next connection, and refused too.
	var fs *fastStart
	if anchor == nil && q.reqSize <= DefaultMaxPacket {
		fs = &fastStart{childOK: wait}
	}
	t, err := q.join(ctx, kind, data, anchor, false, fs)
	if err != nil {
		return nil, err
	}
	l, err := t.await(ctx, wait, fs)
	if err != nil {
		t.abandon(ctx)
		return nil, err
	}
	return l, nil
}

// fastStart is what an Acquire learns while its create is in flight, so
// that the first decision costs no further round trip:
//   - list: the children listing, sent right behind the create on the same
//     connection (trackedConn reports when the create is written; a
//     request made after that is sent after it, and ZooKeeper answers one
//     session's requests in order). It is used only if it lists the
//     caller's node, by its exact name: a listing that shows the node
//     reflects a state at or after the create, which is all a decision
//     needs ("decide from a listing taken after the create", case C14). A
//     listing that does not show it (sent on a connection that then broke,
//     a create that failed and was retried) is dropped and the wait lists
//     again.
//   - pre: the lease, filled in from the create2 reply's Stat (czxid and
//     ephemeral owner, from the server), registered (Session.registerEarly)
//     before any watch on its node is set.
//   - child: when the queue was last found uncontended (Queue.solo), the
//     listing sets a child watch on the directory, which stands in for the
//     lease's own-node watch if the listing grants (see childSlot).
//
// Where the own-node watch comes from, by how the grant is made (each sets
// it no later than the state the grant was decided on, so no deletion of
// the node can go unseen in between):
//   - on the pipelined listing with its child watch, or on a waiter's
//     re-list (which sets one whenever the waiter has an early lease): the
//     child watch;
//   - on a listing without a child watch (the first Acquire of a Queue, a
//     contended one, TryAcquire, a Ticket's Await): Queue.grant reads the
//     node with a data watch before granting (one round trip);
//   - on a wakeup that skips the re-list (skipRelist): the getData with
//     watch that confirms the node after its predecessor's deletion.
//
// A waiter sets no watch on its own node: a deletion of it by someone else
// is found at its next wakeup (a re-list, or the skip's read), and a lost
// session ends the wait at once (case C10). TryAcquire never sets the child
// watch: a "not acquired" leaves no watch registered in go-zookeeper (whose
// reconnect with registered watches races on its lastZxid field).
type fastStart struct {
	list    *listing
	pre     *lease
	childOK bool       // an Acquire: the listing may set the child watch
	child   *childSlot // the listing's child watch, if it sets one
}

type listing struct {
	done     chan struct{} // capacity 1: one send when the listing returns
	children []string
	err      error
}

// Ticket is a node of a Queue that keeps its place across grants: the
// shape of Curator's LeaderLatch, where a participant's znode outlives a
// suspension of the connection and leadership is granted again to the same
// znode when the connection comes back in the same ZooKeeper session.
//
// A lease granted to a Ticket ends at SUSPENDED under the Session's suspend
// policy (and at session loss, or when its node is deleted) like any lease,
// but its node is not deleted then: Await can grant it again. Its token is
// then the same (the czxid of the same znode): no other participant can have
// been granted in between, since the node kept its place. The ticket dies
// with its ZooKeeper session or its node; Await then fails and the caller
// joins again with a new Ticket. A Ticket is safe for concurrent use, but
// one Await at a time is meaningful.
type Ticket struct {
	q     *Queue
	name  string // child name
	path  string // absolute
	ep    *epoch
	owner int64
	keep  bool
	token int64 // for an anchored node: its anchor's token

	mu    sync.Mutex
	dead  error // why the ticket can no longer be granted
	lease *lease
}

// Join creates the caller's node (ephemeral sequential, protected name, of
// the given kind, carrying data) and returns its Ticket without waiting for
// a grant. ZooKeeper operations: create (plus container creates for missing
// parents; sync and getChildren after a lost reply). Errors: as Acquire
// (none of them leaves a node behind).
//
// Join deliberately takes none of Acquire's fast paths (fastStart): its
// create is a plain create (not create2) with no listing pipelined behind
// it, and Await reads the node's Stat with a getData watch at the grant
// and re-lists on every wakeup (no skipRelist: that needs the create2 Stat
// of an early lease). A Ticket's node outlives suspensions and is granted
// again, possibly much later than its create, and an early lease registered
// at the create would have to be kept, re-armed and dropped across Awaits;
// a latch does not acquire often enough to pay for that. The one-request
// release (Lease.Release by version) applies to a Ticket's grants too: the
// version is read at the grant.
func (q *Queue) Join(ctx context.Context, kind string, data []byte) (*Ticket, error) {
	return q.join(ctx, kind, data, nil, true, nil)
}

// join creates the node. With fs (an Acquire's), the create goes out as
// create2 and the listing right behind it (see fastStart).
func (q *Queue) join(ctx context.Context, kind string, data []byte, anchor *anchorSpec, keep bool, fs *fastStart) (*Ticket, error) {
	if !slices.Contains(q.kinds, kind) {
		return nil, fmt.Errorf("%w: node kind %q is not one of %q", ErrBadOption, kind, q.kinds)
	}
	if err := q.checkCreate(kind, data, anchor); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	ep, err := q.s.current()
	if err != nil {
		return nil, err
	}
	guid := newGUID()
	var slot *createSlot
	var prefix string
	if fs != nil {
		prefix = q.adir + "/" + nodePrefix(guid, kind, false, 0)
		lst := &listing{done: make(chan struct{}, 1)}
		if fs.childOK && q.solo.Load() {
			fs.child = q.s.addChildSlot(q.adir)
		}
		watch := fs.child != nil
		slot = &createSlot{onWritten: func() {
			q.s.pool.run(func() {
				if watch {
					lst.children, _, _, lst.err = q.s.conn.ChildrenW(q.adir)
				} else {
					lst.children, _, lst.err = q.s.conn.Children(q.adir)
				}
				lst.done <- struct{}{}
			})
		}}
		fs.list = lst
		q.s.registerCreate(prefix, slot)
	}
	name, err := q.create(ctx, guid, kind, data, anchor)
	var c2ok bool
	var c2 zk.Stat
	if slot != nil {
		written, replied, rpath, st := q.s.unregisterCreate(prefix, slot)
		if !written {
			fs.list = nil
		}
		c2ok, c2 = replied && err == nil && path.Base(rpath) == name, st
		// The child watch is of use only to an early lease granted on the
		// pipelined listing.
		if fs.child != nil && (fs.list == nil || err != nil || !c2ok) {
			q.s.dropChildSlot(fs.child)
			fs.child = nil
		}
	}
	if err != nil {
		// The create may have been applied: remove whatever carries our GUID.
		q.deleteOwned(ctx, cleanupItem{dir: q.adir, guid: guid, owner: q.s.ID(), sends: lostSends{size: q.reqSize}}, false)
		if isConnErr(err) && ep.ctx.Err() != nil && !errors.Is(err, ErrSessionLost) {
			// The connection failed because the session it served is
			// lost (expired, or presumed expired by the watchdog): say so,
			// so that a caller can join again on the next session.
			err = errorf("%w (%w)", context.Cause(ep.ctx), err)
		}
		return nil, err
	}
	t := &Ticket{q: q, name: name, path: q.adir + "/" + name, ep: ep, owner: ep.id, keep: keep}
	if anchor != nil {
		t.token = anchor.token
	}
	// Which session owns the node? The create was sent after ep was current;
	// if ep is still current and not lost, ep's session created it (a new
	// session is reported before any request is sent on its connection).
	if cur, cerr := q.s.current(); cerr != nil {
		return nil, cerr // closed: the node went with the session
	} else if cur != ep || ep.ctx.Err() != nil {
		if fs != nil {
			q.s.dropChildSlot(fs.child)
			*fs = fastStart{}
		}
		t.ep, t.owner = cur, cur.id
		var ok bool
		var st *zk.Stat
		err := q.s.call(ctx, func() (err error) {
			ok, st, err = q.s.conn.Exists(t.path)
			return err
		}, nil)
		if err == nil && (!ok || st.EphemeralOwner != cur.id) {
			err = fmt.Errorf("%w: node created under a session that is gone", ErrSessionLost)
		}
		if err != nil {
			t.abandon(ctx)
			return nil, q.wrap("create", err)
		}
	} else if fs != nil && c2ok && c2.EphemeralOwner == ep.id {
		// The server's Stat of the node just created, owned by the
		// current session: the lease can be granted without reading it.
		lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		fs.pre = &lease{s: q.s, path: t.path, owner: ep.id, czxid: c2.Czxid, version: c2.Version,
			keep: keep, kinds: q.kinds, ctx: lctx, cancel: cancel}
		q.s.registerEarly(fs.pre, fs.child)
	} else if fs != nil {
		q.s.dropChildSlot(fs.child)
		fs.child = nil
	}
	return t, nil
}

// Name returns the ticket's znode name (a child of the queue directory).
func (t *Ticket) Name() string { return t.name }

// SessionID returns the ZooKeeper session that owns the ticket's znode.
func (t *Ticket) SessionID() int64 { return t.owner }

// Err returns nil while the ticket can still be granted, and otherwise why
// not: ErrSessionLost or ErrSessionClosed (the node went with its session),
// ErrNodeDeleted (deleted by someone else), ErrReleased (Leave was called,
// or its grant was released, which deletes the node). The first cause
// found sticks.
func (t *Ticket) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dead != nil {
		return t.dead
	}
	if t.lease != nil {
		// The grant's Release deletes the node; a deletion by anyone else
		// ends the grant: either way the place is gone.
		switch c := context.Cause(t.lease.ctx); {
		case errors.Is(c, ErrReleased):
			return ErrReleased
		case errors.Is(c, ErrNodeDeleted):
			return ErrNodeDeleted
		}
	}
	if t.ep.ctx.Err() != nil {
		return context.Cause(t.ep.ctx)
	}
	return nil
}

// Await blocks until the Rule grants the ticket's node, and returns the
// lease (see Ticket for its token and for what happens at SUSPENDED). A
// SUSPENDED connection is waited out. ZooKeeper operations: as Acquire,
// without the create. Errors: ctx's cause (the node stays: call Leave to
// give the place up); ErrSessionLost, ErrSessionClosed, ErrNodeDeleted or
// ErrReleased when the ticket is dead (its node is gone, or deleted now);
// *OpError for refusals.
func (t *Ticket) Await(ctx context.Context) (Lease, error) {
	l, err := t.await(ctx, true, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Leave gives the ticket's place up: it ends a live lease of the ticket
// (cause ErrReleased) and deletes the node with an identity check, ignoring
// ctx's cancellation for the first attempt and handing a delete that can't
// complete to the Session's cleaner. It is idempotent. Errors: as
// Lease.Release for the delete (ErrLeaseLost is not reported).
func (t *Ticket) Leave(ctx context.Context) error {
	t.mu.Lock()
	if t.dead == nil {
		t.dead = ErrReleased
	}
	l := t.lease
	t.mu.Unlock()
	if l != nil {
		if err := l.Release(ctx); err == nil || !errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
	err := t.q.deleteOwned(ctx, cleanupItem{path: t.path, owner: t.owner}, true)
	if err != nil {
		return &OpError{Op: "delete", Path: t.q.dir + "/" + t.name, Err: err}
	}
	return nil
}

// abandon deletes the ticket's node after a failure, ignoring the caller's
// cancellation, without waiting long (the cleaner finishes the job).
func (t *Ticket) abandon(ctx context.Context) {
	t.mu.Lock()
	if t.dead == nil {
		t.dead = ErrReleased
	}
	t.mu.Unlock()
	t.q.deleteOwned(ctx, cleanupItem{path: t.path, owner: t.owner}, false)
}

func (t *Ticket) await(ctx context.Context, wait bool, fs *fastStart) (*lease, error) {
	if err := t.Err(); err != nil {
		if fs != nil && fs.pre != nil {
			t.q.s.dropLease(fs.pre)
		}
		return nil, err
	}
	l, err := t.q.wait(ctx, t, wait, fs)
	if err != nil {
		if t.keep && (errors.Is(err, ErrSessionLost) || errors.Is(err, ErrNodeDeleted) || errors.Is(err, ErrSessionClosed)) {
			t.mu.Lock()
			if t.dead == nil {
				t.dead = err
			}
			t.mu.Unlock()
			t.abandon(ctx) // a node a presumed-lost session may still own
		}
		return nil, err
	}
	t.mu.Lock()
	t.lease = l
	t.mu.Unlock()
	return l, nil
}

// wait lists, decides and watches until the Rule grants t's node. With fs
// (an Acquire's), the first decision uses the pipelined listing and the
// early lease (see fastStart).
func (q *Queue) wait(ctx context.Context, t *Ticket, wait bool, fs *fastStart) (_ *lease, err error) {
	ep := t.ep
	// Every wait also ends when the node's session is lost.
	wctx, wcancel := context.WithCancelCause(ctx)
	defer wcancel(nil)
	defer context.AfterFunc(ep.ctx, func() { wcancel(context.Cause(ep.ctx)) })()

	var pre *lease     // the early lease, until it is granted or dropped
	var first []string // the pipelined listing
	if fs != nil {
		pre = fs.pre
		if fs.list != nil {
			select {
			case <-fs.list.done:
				if fs.list.err == nil {
					first = fs.list.children
				}
				fs.list = nil // not kept alive while waiting
			case <-wctx.Done():
			case <-q.s.quit:
			}
		}
	}
	defer func() {
		if pre != nil {
			q.s.dropLease(pre)
		}
	}()

	queued := false // reported to Metrics.Waiting
	for {
		if wctx.Err() != nil {
			return nil, context.Cause(wctx)
		}
		var children []string
		piped := first != nil
		watched := piped && pre != nil && pre.child != nil // listed with a child watch
		if piped {
			children, first = first, nil
		} else {
			// A waiter with an early lease re-lists with a child watch,
			// which stands in for its own-node watch if this listing grants
			// it (see childSlot): a wakeup then costs one request.
			var slot *childSlot
			if pre != nil {
				slot = q.s.addChildSlotFor(q.adir, pre)
			}
			err := q.s.retry(wctx, q.reqSize, func() (err error) {
				if slot != nil {
					children, _, _, err = q.s.conn.ChildrenW(q.adir)
				} else {
					children, _, err = q.s.conn.Children(q.adir)
				}
				return err
			})
			watched = slot != nil && err == nil
			if errors.Is(err, zk.ErrNoNode) {
				children, err = nil, nil // directory deleted: so was our node
			}
			if err != nil {
				return nil, q.wrap("children", err)
			}
		}
		nodes, k, mixed := parseListing(children, q.kinds)
		if mixed {
			return nil, q.mixed(k)
		}
		self := slices.IndexFunc(nodes, func(n NodeName) bool { return n.Name == t.name })
		if self < 0 {
			if piped {
				continue // a pipelined listing that does not show the node: list again
			}
			return nil, q.vanished(ep)
		}
		holds, watch := q.rule(nodes, self)
		if piped && fs.childOK {
			q.solo.Store(holds && len(nodes) == 1)
		}
		if holds {
			var l *lease
			var err error
			if watched && q.s.useChildSlot(pre.child) {
				// Granted on the listing that set the child watch, which has
				// not fired: it covers the node from that listing on.
				l, err = q.grantEarly(ep, pre)
				pre = nil
			} else {
				if pre != nil {
					q.s.dropLease(pre)
					pre = nil
				}
				l, err = q.grant(wctx, ep, t)
			}
			if err != nil {
				return nil, err
			}
			if l != nil {
				return l, nil
			}
			// Suspended between the listing and the grant: wait for the
			// connection (our node keeps its place), then decide again.
			if err := q.s.awaitConnected(wctx); err != nil {
				return nil, err
			}
			continue
		}
		if !wait {
			return nil, fmt.Errorf("%w: %s (holder %s)", ErrLocked, ShortPath(q.dir), nodes[0].Name)
		}
		if pre != nil && pre.child != nil {
			q.s.dropChildSlot(pre.child) // a waiter has no use for it
		}
		if m := q.s.cfg.metrics; m != nil && !queued {
			queued = true
			kind := metricKind(nodes[self].Kind)
			m.Waiting(kind, q.dir, 1)
			defer m.Waiting(kind, q.dir, -1)
		}
		paths := make([]string, 0, len(watch))
		for _, w := range watch {
			if w < 0 || w >= len(nodes) || w == self {
				return nil, fmt.Errorf("%w: the rule for %s named no valid node to watch (index %d of %d)", ErrBadOption, ShortPath(q.dir), w, len(nodes))
			}
			paths = append(paths, q.adir+"/"+nodes[w].Name)
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%w: the rule for %s named no node to watch", ErrBadOption, ShortPath(q.dir))
		}
		// Whether a deletion of the watched node may be decided without a
		// re-list is known now, so that the listing is not used (and so not
		// kept alive) while waiting: a waiter k places back would hold k
		// names (≤ 8 KiB of heap per queued waiter is a target).
		canSkip := pre != nil && q.skipCandidate(nodes, self, watch)
		w, stop, err := q.s.watchNodes(wctx, paths...)
		if err != nil {
			return nil, q.wrap("get", err)
		}
		var preDone <-chan struct{}
		if pre != nil {
			preDone = pre.ctx.Done()
		}
		select {
		case <-w.ch: // deleted, changed, or no longer watched
			stop()
			if canSkip && w.deleted {
				// Our node must be known to exist after P's deletion: the
				// order of watch events does not show it (a multi can delete
				// P and our node at one zxid, and our node's event then comes
				// right after P's), so ask, with a request sent after P's
				// event: a getData on our node alone, not a listing. Its
				// watch is the lease's own-node watch, set in the same
				// request that confirms the node (NoNode sets none).
				var st *zk.Stat
				err := q.s.retry(wctx, q.reqSize, func() (err error) {
					_, st, _, err = q.s.conn.GetW(t.path)
					return err
				})
				ok := err == nil
				if errors.Is(err, zk.ErrNoNode) {
					err = nil
				}
				if err != nil {
					return nil, q.wrap("get", err)
				}
				if ok && st.Czxid == pre.czxid && st.EphemeralOwner == ep.id {
					q.s.mu.Lock()
					pre.arming, pre.version = true, st.Version
					q.s.mu.Unlock()
					l, err := q.grantEarly(ep, pre)
					pre = nil
					if err != nil {
						return nil, err
					}
					if l != nil {
						return l, nil
					}
					if err := q.s.awaitConnected(wctx); err != nil {
						return nil, err
					}
				}
			}
			// re-list
		case <-preDone:
			// The own node was deleted (or the early lease ended): re-list,
			// which reports it (case C10).
			stop()
			q.s.dropLease(pre)
			pre = nil
		case <-wctx.Done():
			stop()
			return nil, context.Cause(wctx)
		case <-q.s.quit:
			stop()
			return nil, ErrSessionClosed
		}
	}
}

// skipRelist reports whether a wakeup may decide without listing again (the
// one exception to "every wakeup re-lists", rule 5 of the fault cases). The
// argument:
//   - the listing was taken after our create (it shows our node), and our
//     node had exactly one node before it: the watched node P (self == 1);
//   - P no longer exists: the watch fired because P was deleted (a
//     NodeDeleted event, or NoNode when the watch was set), not for a data
//     change or a dropped watch;
//   - no node can have appeared before ours since that listing: a node
//     created later has a larger sequence (wrap-aware, SeqLess) and sorts
//     after ours, except an anchored node, which takes its anchor's place.
//     An anchored node is made only by AcquireAnchored, which refuses a
//     queue of one node kind, and the skip is made only in a queue of one
//     kind whose listing showed no anchored node. So an anchored node of
//     our kind can only come from a Queue whose kinds are a strict superset
//     of ours (another recipe on our directory); such a recipe's nodes of
//     its other kinds are foreign to us and never predecessors (rule 1), so
//     a directory shared by Queues of different kinds has no mutual
//     exclusion to keep in the first place. (TestSkipRelistAnchoredRefused:
//     before AcquireAnchored refused one-kind queues, an anchored node
//     made by the holder's session after the waiter's listing was granted
//     together with the skipping waiter);
//   - our node exists, in the same session: the caller then reads it with
//     a getData (with watch) sent after P's deletion was seen (czxid and
//     owner must be ours), and grantEarly requires the lease not ended (a deletion of our
//     node since ends it), the epoch and generation unchanged and the
//     connection up (no suspension in between);
//   - so our node is the lowest now, and stays so while it exists; the Rule
//     grants the lowest node whatever follows it (checked on the listing
//     without P; that nodes created later cannot change that answer is
//     assumed of the Rule, as it holds for FirstHolds and the semaphore's).
//
// Multi-node watches: the skip needs exactly one watched node, at index 0,
// and self == 1. A semaphore of N > 1 leases never gets there (it holds at
// index 1, and its waiters watch N nodes); a semaphore of one lease is
// FirstHolds and the argument above holds as is. A read-write lock's queue
// has two kinds and never skips. A Ticket's Await (latch) and an anchored
// Acquire have no early lease and never skip either.
//
// A wakeup that fails any of these lists again.
func (q *Queue) skipRelist(nodes []NodeName, self int, watch []int, w *wakeup) bool {
	return w.deleted && q.skipCandidate(nodes, self, watch)
}

// skipCandidate is skipRelist's conditions on the listing, before the
// wakeup.
func (q *Queue) skipCandidate(nodes []NodeName, self int, watch []int) bool {
	if self != 1 || len(watch) != 1 || watch[0] != 0 || len(q.kinds) != 1 {
		return false
	}
	for _, n := range nodes {
		if n.Anchored {
			return false
		}
	}
	holds, _ := q.rule(nodes[1:], 0)
	return holds
}

// grantEarly activates an early lease (its Stat came with the create; its
// own-node watch is its child watch or was set by the caller). It returns
// (nil, nil) when the connection was suspended since.
func (q *Queue) grantEarly(ep *epoch, l *lease) (*lease, error) {
	cause := q.s.activateLease(l, ep, l.gen, l.czxid)
	switch {
	case cause == nil:
		return l, nil
	case errors.Is(cause, ErrNodeDeleted):
		return nil, q.vanished(ep)
	case ep.ctx.Err() != nil:
		return nil, context.Cause(ep.ctx)
	case errors.Is(cause, ErrSessionClosed):
		return nil, cause
	}
	return nil, nil
}

// grant reads the own node's Stat with a data watch and turns it into a
// lease. It returns (nil, nil) when the connection was suspended meanwhile.
func (q *Queue) grant(ctx context.Context, ep *epoch, t *Ticket) (*lease, error) {
	s := q.s
	l, gen := s.prepareLease(ctx, t.path, ep.id)
	l.keep = t.keep
	l.kinds = q.kinds
	l.token = t.token
	var st *zk.Stat
	err := s.retry(ctx, q.reqSize, func() (err error) {
		_, st, _, err = s.conn.GetW(t.path)
		return err
	})
	if err == nil && st.EphemeralOwner != ep.id {
		err = fmt.Errorf("%w: own node belongs to session 0x%x, not 0x%x", ErrSessionLost, st.EphemeralOwner, ep.id)
	}
	if errors.Is(err, zk.ErrNoNode) {
		err = q.vanished(ep)
	}
	if err != nil {
		s.dropLease(l)
		return nil, q.wrap("get", err)
	}
	l.version = st.Version
	if cause := s.activateLease(l, ep, gen, st.Czxid); cause != nil {
		if errors.Is(cause, ErrNodeDeleted) {
			return nil, q.vanished(ep)
		}
		if ep.ctx.Err() != nil {
			return nil, context.Cause(ep.ctx)
		}
		return nil, nil
	}
	return l, nil
}

// mixed is the error of a listing that holds nodes of another recipe's
// kind k.
func (q *Queue) mixed(k string) error {
	return fmt.Errorf("%w: %s has %q nodes beside this recipe's %q", ErrMixedRecipes, ShortPath(q.dir), k, q.kinds)
}

// vanished explains why the own node is no longer listed.
func (q *Queue) vanished(ep *epoch) error {
	if ep.ctx.Err() != nil {
		return context.Cause(ep.ctx)
	}
	return fmt.Errorf("%w: %s", ErrNodeDeleted, ShortPath(q.dir))
}

func (q *Queue) wrap(op string, err error) error {
	var oe *OpError
	if err == nil || errors.As(err, &oe) || errors.Is(err, ErrSessionLost) || errors.Is(err, ErrNodeDeleted) ||
		errors.Is(err, ErrSessionClosed) || errors.Is(err, ErrSuspended) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrLocked) {
		return err
	}
	return opErr(op, q.dir, err)
}

// create sends the protected ephemeral sequential create and returns the
// child name.
func (q *Queue) create(ctx context.Context, guid, kind string, data []byte, anchor *anchorSpec) (string, error) {
	s := q.s
	var prefix string
	if anchor != nil {
		prefix = q.adir + "/" + nodePrefix(guid, kind, true, anchor.seq)
	} else {
		prefix = q.adir + "/" + nodePrefix(guid, kind, false, 0)
	}
	unknown := false // an earlier attempt may have been applied
	var name string
	// A create still in flight when the caller stops waiting (case C4) is
	// undone when it lands: the caller's own clean-up may already have run.
	q.pending.add()
	late := func(err error) {
		defer q.pending.done()
		owner := s.ID()
		switch {
		case err == nil && name != "":
			q.deleteOwned(context.Background(), cleanupItem{path: q.adir + "/" + name, owner: owner}, false)
		case err != nil && isConnErr(err):
			q.deleteOwned(context.Background(), cleanupItem{dir: q.adir, guid: guid, owner: owner, sends: lostSends{size: q.reqSize}}, false)
		}
	}
	err, abandoned := s.retryLate(ctx, &lostSends{size: max(q.reqSize, q.createSize(kind, data, anchor))}, func() error {
		if unknown {
			n, err := q.findByGUID(guid)
			if err != nil || n != "" {
				name = n
				return err
			}
		}
		for attempt := 0; ; attempt++ {
			var p string
			var err error
			if anchor != nil {
				// The anchored node takes the anchor's place: create it only
				// while the anchor exists, atomically.
				var res []zk.MultiResponse
				res, err = s.conn.Multi(&zk.CheckVersionRequest{Path: anchor.path, Version: -1},
					&zk.CreateRequest{Path: prefix, Data: data, Acl: s.cfg.acl, Flags: zk.FlagEphemeral | zk.FlagSequence})
				if err == nil && len(res) == 2 {
					p = res[1].String
				}
				if errors.Is(err, zk.ErrNoNode) {
					return errorf("%w (%w: the anchor %s is gone)", ErrLeaseLost, ErrNodeDeleted, path.Base(anchor.path))
				}
			} else {
				p, err = s.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, s.cfg.acl)
			}
			if err == nil {
				name = path.Base(p)
				return nil
			}
			if errors.Is(err, zk.ErrNoNode) && attempt < 10 {
				// The directory is missing, or was deleted between our ensure
				// and this create (case C18): create it and try again.
				if err := q.ensureDir(); err != nil {
					return err
				}
				continue
			}
			if isConnErr(err) && !errors.Is(err, zk.ErrNoServer) {
				unknown = true
			}
			return err
		}
	}, late)
	if !abandoned {
		q.pending.done()
	}
	if err != nil {
		return "", q.wrap("create", err)
	}
	return name, nil
}

// Drain waits until no create sent by this Queue is still in flight and
// every delete of a node this Queue gave up (a failed or cancelled Acquire,
// Ticket.Leave, a create that landed after its caller stopped waiting) is
// finished: the node is deleted, found gone, or went with its session. A
// delete waiting for a reconnection keeps Drain waiting until it is done
// or ctx ends. A recipe's Close calls it so that no node of its exists after
// Close returns (case C12). Errors: ctx's cause.
func (q *Queue) Drain(ctx context.Context) error {
	return q.pending.wait(ctx)
}

// deleteOwned is Session.deleteOwned, counted in q.pending until finished.
func (q *Queue) deleteOwned(ctx context.Context, it cleanupItem, wait bool) error {
	q.pending.add()
	it.done = q.pending.done
	return q.s.deleteOwned(ctx, it, wait)
}

// inflight counts operations and lets a caller wait for zero.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n == 0
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.zero)
		f.zero = nil
	}
}

func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	ch := f.zero
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// findByGUID looks for a node of ours carrying guid, after a sync so that the
// server answering has seen every write the leader committed. Only a node
// whose ephemeral owner is the current session is adopted (case C3); extra
// copies, if any, are deleted.
func (q *Queue) findByGUID(guid string) (string, error) {
	s := q.s
	if _, err := s.conn.Sync(q.adir); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil
		}
		return "", err
	}
	children, _, err := s.conn.Children(q.adir)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	cur := s.ID()
	var mine []NodeName
	for _, c := range children {
		if !strings.HasPrefix(c, protectedPrefix+guid+"-") {
			continue
		}
		ok, st, err := s.conn.Exists(q.adir + "/" + c)
		if err != nil {
			return "", err
		}
		if ok && st.EphemeralOwner == cur {
			if n, ok := ParseNodeName(c, q.kinds); ok {
				mine = append(mine, n)
			}
		}
	}
	if len(mine) == 0 {
		return "", nil
	}
	SortNodes(mine)
	for _, extra := range mine[1:] {
		s.deleteOwned(context.Background(), cleanupItem{path: q.adir + "/" + extra.Name, owner: cur}, false)
	}
	return mine[0].Name, nil
}

// ensureDir creates the queue directory and its missing ancestors: see
// ensurePath.
func (q *Queue) ensureDir() error {
	return q.s.ensurePath(q.adir, q.s.cfg.acl)
}

// ensurePath creates the znode p (a server path, chroot included) and its
// missing ancestors below the chroot as container znodes (the server
// removes them once empty, Curator's creatingParentContainersIfNeeded),
// bottom-up: it starts at p and walks up only on NoNode, so it never needs
// permissions above the first existing ancestor. A missing chroot (and its
// missing ancestors) is created as persistent znodes, since a chroot is an
// application's root and must not vanish when empty. NodeExists is
// success. An error names the znode it could not create. The recipes'
// directories and EnsureDir (for fence/fencezk's parents) come here.
func (s *Session) ensurePath(p string, acl []zk.ACL) error {
	flags, create := int32(zk.FlagContainer), s.conn.CreateContainer
	if p == s.chroot || !strings.HasPrefix(p, s.chroot+"/") {
		flags, create = 0, s.conn.Create
	}
	_, err := create(p, nil, flags, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.ensurePath(path.Dir(p), acl); err != nil {
			return err
		}
		_, err = create(p, nil, flags, acl)
	}
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	what := "directory"
	if !strings.HasPrefix(p, s.chroot+"/") {
		what = "chroot znode"
	}
	return fmt.Errorf("creating the %s %s: %w", what, ShortPath(p), err)
}

// EnsureDir creates dir, a path below the session's chroot as every recipe
// path, and its missing ancestors, as the recipes create their
// directories: containers below the chroot (removed by the server once
// empty), the chroot itself and its missing ancestors persistent, creating
// nothing above the first existing ancestor. dir "/" stands for the chroot
// itself (nothing to create without one). acl is the new znodes' ACL (nil:
// the session's, WithACL). It retries on connection loss until ctx ends.
// Packages that create znodes of their own below a directory
// (fence/fencezk's registers) call it on a NoNode, so that a session whose
// chroot does not exist yet works as it does for the recipes.
//
// Errors: a *PathError (ErrInvalidPath); an *OpError naming the znode
// that could not be created (ErrNoPermission for an ACL refusal);
// ErrSessionClosed; ctx's cause.
func (s *Session) EnsureDir(ctx context.Context, dir string, acl []zk.ACL) error {
	if dir != "/" {
		if err := ValidatePath(dir); err != nil {
			return err
		}
	}
	p := s.abs(dir)
	if dir == "/" {
		if s.chroot == "" {
			return nil
		}
		p = s.chroot
	}
	if acl == nil {
		acl = s.cfg.acl
	}
	return s.retry(ctx, len(p)+pathSlack, func() error { return opErr("create", dir, s.ensurePath(p, acl)) })
}

// Participant is one node of a queue, as listed by Participants.
type Participant struct {
	Name      string      // child name
	Kind      string      // node kind
	Seq       int32       // ZooKeeper sequence number
	Token     fence.Token // czxid: the fencing token it holds or will hold
	SessionID int64       // ephemeral owner
	Created   time.Time   // ctime
	Data      []byte      // the data given at Acquire
}

// Participants lists the queue's nodes in queue order (for an exclusive lock
// the first is the holder). Foreign children are left out. ZooKeeper
// operations: getChildren, then getData per node (nodes that vanish meanwhile
// are skipped). Errors: ErrMixedRecipes when the directory holds another
// recipe's nodes (as for Acquire: the list would leave out who holds),
// *OpError, ErrSessionClosed, ctx's cause. A missing directory gives an
// empty list.
func (q *Queue) Participants(ctx context.Context) ([]Participant, error) {
	var children []string
	err := q.s.retry(ctx, q.reqSize, func() (err error) {
		children, _, err = q.s.conn.Children(q.adir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, q.wrap("children", err)
	}
	nodes, k, mixed := parseListing(children, q.kinds)
	if mixed {
		return nil, q.mixed(k)
	}
	var out []Participant
	for _, n := range nodes {
		var data []byte
		var st *zk.Stat
		err := q.s.retry(ctx, q.reqSize, func() (err error) {
			data, st, err = q.s.conn.Get(q.adir + "/" + n.Name)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, q.wrap("get", err)
		}
		out = append(out, Participant{Name: n.Name, Kind: n.Kind, Seq: n.Seq, Token: fence.Token(st.Czxid),
			SessionID: st.EphemeralOwner, Created: time.UnixMilli(st.Ctime), Data: data})
	}
	return out, nil
}
