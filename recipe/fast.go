package recipe

import (
	"context"
	"errors"
	"path"

	"github.com/go-zookeeper/zk"
)

// The fast paths of an Acquire, called from join and from the core loop in
// wait.go at named points. Each saves a round trip and none changes what is
// decided; a fast path that does not apply falls back to the loop's plain
// step.
//
//   - create2 token: the create is sent as create2, whose reply carries the
//     node's Stat (owner, czxid): the lease is prepared without a read
//     (docs/design.md#the-create2-token).
//   - pipelined listing: the first listing is sent right behind the create
//     and used only if it shows the caller's node.
//   - child-watch stand-in: a listing with a child watch on the directory
//     stands in for the own-node watch of a lease granted on it
//     (docs/design.md#the-child-watch-stand-in).
//   - re-list skip: a waiter whose only predecessor was deleted is granted
//     on a read of its own node (docs/design.md#waking-and-the-re-list-skip).
//   - own-node read beside the listing: a waiter without an early lease
//     reads its node while it lists, not after
//     (docs/design.md#one-round-trip-per-hand-off).
//   - prefetch: a waiter with an early lease has its wakeup request (the
//     re-list, or the skip's read) sent from the event callback that wakes
//     it (docs/design.md#one-round-trip-per-hand-off).
//
// Only the skip relies on the Rule beyond its stated contract: on the
// declared GrantsLowest, and on no anchors (skipCandidate). The others
// hold whatever the Rule.

// fastStart is what an Acquire learns while its create is in flight.
type fastStart struct {
	list    *listing   // the listing pipelined behind the create
	pre     *lease     // the early lease, from the create2 reply's Stat
	childOK bool       // an Acquire that waits: the listing may set the child watch
	child   *childSlot // the listing's child watch, if it sets one
}

type listing struct {
	done     chan struct{} // capacity 1: one send when the listing returns
	children []string
	err      error
}

// fastStartFor says whether an acquisition takes the fast paths. An
// anchored create takes none: it is a multi, whose create is not rewritten
// to create2. Nor does a queue whose requests may be over the servers'
// default packet limit: a listing sent behind a refused create would be
// sent again on the next connection, and refused too. TryAcquire's
// pipelined listing never sets the child watch, so a "not acquired"
// normally leaves no watch registered.
func (q *Queue) fastStartFor(wait bool, anchor *anchorSpec) *fastStart {
	if anchor != nil || q.reqSize > DefaultMaxPacket {
		return nil
	}
	return &fastStart{childOK: wait}
}

// createPipe is the listing pipelined behind one create.
type createPipe struct {
	s      *Session
	fs     *fastStart
	prefix string
	slot   *createSlot
}

// pipeListing arranges for the create of guid to go out as create2 and for
// the listing (with a child watch when the queue was last found
// uncontended) to be sent as soon as the create is written. Nil without fs.
func (q *Queue) pipeListing(fs *fastStart, guid, kind string) *createPipe {
	if fs == nil {
		return nil
	}
	lst := &listing{done: make(chan struct{}, 1)}
	if fs.childOK && q.solo.Load() {
		fs.child = q.s.addChildSlot(q.adir)
	}
	watch := fs.child != nil
	slot := &createSlot{onWritten: func() {
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
	p := &createPipe{s: q.s, fs: fs, prefix: q.adir + "/" + nodePrefix(guid, kind, false, 0), slot: slot}
	q.s.registerCreate(p.prefix, slot)
	return p
}

// finish ends the pipe after the create returned name, err: it returns the
// create2 reply's Stat if it is the reply to that create. A listing never
// sent is dropped, and so is the child watch when no early lease can use it.
func (p *createPipe) finish(name string, err error) (zk.Stat, bool) {
	if p == nil {
		return zk.Stat{}, false
	}
	fs := p.fs
	written, replied, rpath, st := p.s.unregisterCreate(p.prefix, p.slot)
	if !written {
		fs.list = nil
	}
	ok := replied && err == nil && path.Base(rpath) == name
	if fs.child != nil && (fs.list == nil || err != nil || !ok) {
		p.s.dropChildSlot(fs.child)
		fs.child = nil
	}
	return st, ok
}

// discard gives up all of fs: the listing, the early lease's Stat and the
// child watch (the node was created under another session).
func (fs *fastStart) discard(s *Session) {
	if fs != nil {
		s.dropChildSlot(fs.child)
		*fs = fastStart{}
	}
}

// dropChildSlot gives up fs's child watch only (no early lease to cover);
// the pipelined listing is kept.
func (fs *fastStart) dropChildSlot(s *Session) {
	if fs != nil {
		s.dropChildSlot(fs.child)
		fs.child = nil
	}
}

// earlyLease prepares t's lease from the server's Stat of the node just
// created (reply, owned by the current session) and registers it before any
// watch on its node is set.
func (q *Queue) earlyLease(ctx context.Context, fs *fastStart, t *Ticket, reply zk.Stat) {
	if fs == nil {
		return
	}
	fs.pre = q.s.registerEarly(ctx, t.leaseNode(), reply, fs.child)
}

// fastWait is the fast-path state of one wait: the pipelined listing until
// used, the early lease until granted or dropped, and the own-node read
// sent with the current listing. Without fs (a Ticket's Await, an anchored
// Acquire) a wait takes only the last.
type fastWait struct {
	q       *Queue
	first   []string   // the pipelined listing
	pre     *lease     // the early lease
	slot    *childSlot // pre's child watch, if any
	childOK bool       // the solo hint is updated (an Acquire that waits)
	watched bool       // the current listing set pre's child watch
	block   bool       // the wait blocks: a waiter without pre reads its node with each listing
	own     *ownRead   // that read, until granted on or dropped
	pf      *prefetch  // the request sent as the current watch fired
}

// startFast waits for the pipelined listing, if any.
func (q *Queue) startFast(ctx context.Context, fs *fastStart, block bool) *fastWait {
	fw := &fastWait{q: q, block: block}
	if fs == nil {
		return fw
	}
	fw.pre, fw.slot, fw.childOK = fs.pre, fs.child, fs.childOK
	if fs.list != nil {
		select {
		case <-fs.list.done:
			if fs.list.err == nil {
				fw.first = fs.list.children
			}
			fs.list = nil // not kept alive while waiting
		case <-ctx.Done():
		case <-q.s.quit:
		}
	}
	return fw
}

// drop ends the wait's fast paths: the own-node read and the early lease,
// if they were not granted on.
func (fw *fastWait) drop() {
	fw.dropOwnRead()
	fw.dropEarlyLease()
}

// dropEarlyLease drops the early lease (and its child watch) if it was not
// granted.
func (fw *fastWait) dropEarlyLease() {
	if fw.pre != nil {
		fw.q.s.dropLease(fw.pre) // and its child watch
		fw.pre, fw.slot = nil, nil
	}
}

// piped returns the pipelined listing, once.
func (fw *fastWait) piped() ([]string, bool) {
	if fw.first == nil {
		return nil, false
	}
	children := fw.first
	fw.first = nil
	fw.watched = fw.pre != nil && fw.slot != nil
	return children, true
}

// relistSlot returns the child watch a re-list sets: a waiter with an early
// lease re-lists with one, which stands in for its own-node watch if the
// listing grants it. Nil otherwise.
func (fw *fastWait) relistSlot() *childSlot {
	if fw.pre == nil {
		return nil
	}
	fw.slot = fw.q.s.addChildSlotFor(fw.q.adir, fw.pre)
	return fw.slot
}

// listed records whether the re-list set its child watch.
func (fw *fastWait) listed(slot *childSlot, ok bool) { fw.watched = slot != nil && ok }

// decided updates the solo hint from the pipelined listing's decision.
func (fw *fastWait) decided(holds bool, nodes int) {
	if fw.childOK {
		fw.q.solo.Store(holds && nodes == 1)
	}
}

// grantOnChildWatch grants the early lease on the listing that set its
// child watch: the watch covers the node from that listing on (fired
// already, the lease reads its node at once: useChildSlot). ok is false
// when the loop must grant by reading the node; the early lease is dropped
// then.
func (fw *fastWait) grantOnChildWatch(ep *epoch) (l *lease, ok bool, err error) {
	if fw.watched {
		fw.q.s.useChildSlot(fw.slot)
		l, err = fw.q.activate(ep, fw.pre, nil)
		fw.pre, fw.slot = nil, nil
		return l, true, err
	}
	fw.dropEarlyLease()
	return nil, false, nil
}

// dropChildSlot drops the early lease's child watch, keeping the lease: a
// waiter has no use for the watch (a re-list sets a new one).
func (fw *fastWait) dropChildSlot() {
	if fw.pre != nil {
		fw.q.s.dropChildSlot(fw.slot)
	}
}

// ended is done when the early lease ends (its node was deleted).
func (fw *fastWait) ended() <-chan struct{} {
	if fw.pre == nil {
		return nil
	}
	return fw.pre.Context().Done()
}

// mayskip reports whether a deletion of the watched node may be decided
// without a re-list (see skipCandidate). It is decided before waiting, so
// that the listing is not kept alive while waiting.
func (fw *fastWait) mayskip(nodes []NodeName, self int, watch []int) bool {
	return fw.pre != nil && fw.q.skipCandidate(nodes, self, watch)
}

// skipCandidate is the re-list skip's condition on the listing: the Rule is
// declared to grant the lowest node, the queue has no anchored nodes, the
// caller's node is second and watches the first, and the Rule grants it on
// the listing without the first. See
// docs/design.md#waking-and-the-re-list-skip.
func (q *Queue) skipCandidate(nodes []NodeName, self int, watch []int) bool {
	c := q.contract
	if !c.grantsLowest || c.anchors || self != 1 || len(watch) != 1 || watch[0] != 0 {
		return false
	}
	for _, n := range nodes {
		if n.Anchored {
			return false
		}
	}
	holds, _, err := q.decide(nodes[1:], 0)
	return holds && err == nil // a Rule that panics here: no skip; the re-list asks it again
}

// grantOnSkip is the wakeup after the only predecessor's deletion, for a
// skip candidate: a getData with watch on the own node, sent after the
// deletion was seen, confirms it (same czxid and owner) and sets the
// lease's own-node watch in the same request; the early lease is then
// granted. It returns (nil, nil) when the loop must list again.
func (q *Queue) grantOnSkip(ctx context.Context, ep *epoch, t *Ticket, fw *fastWait) (*lease, error) {
	pre := fw.pre
	st, err, fetched := fw.fetchedRead(ctx)
	if !fetched {
		err = q.s.retry(ctx, q.reqSize, func() (err error) {
			_, st, _, err = q.s.conn.GetW(t.path)
			return err
		})
	}
	ok := err == nil
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	if err != nil {
		return nil, q.wrap("get", err)
	}
	if !ok || !pre.isNode(st) {
		return nil, nil
	}
	q.s.ownWatchRead(pre, st.Version)
	l, err := q.activate(ep, pre, nil)
	fw.pre, fw.slot = nil, nil
	if err != nil || l != nil {
		return l, err
	}
	return nil, q.s.awaitConnected(ctx)
}

// ownRead is the own-node read beside a listing: a waiter without an early
// lease (a Ticket's Await, an anchored Acquire, an Acquire whose create2
// Stat was not usable) reads its node with a data watch while it lists, on
// a lease registered before the read is sent, so that a listing that
// grants needs no second round trip. See
// docs/design.md#the-own-node-read-beside-the-listing.
type ownRead struct {
	l    *lease
	st   *zk.Stat // valid once done is closed, if err is nil
	err  error
	done chan struct{}
}

// readOwn sends the own-node read for the listing about to be sent, if
// the wait has no early lease and blocks (a TryAcquire's refusal would
// waste it), and returns the function that waits for its reply.
func (fw *fastWait) readOwn(ctx context.Context, t *Ticket) (wait func()) {
	fw.dropOwnRead()
	if fw.pre != nil || !fw.block {
		return func() {}
	}
	s := fw.q.s
	o := &ownRead{l: s.prepareLease(ctx, t.leaseNode()), done: make(chan struct{})}
	fw.own = o
	go func() {
		defer close(o.done)
		// st is written by the request's worker, which may outlive an
		// error return: published only on success.
		var st *zk.Stat
		o.err = s.call(ctx, func() (err error) {
			_, st, _, err = s.conn.GetW(t.path)
			return err
		}, nil)
		if o.err == nil {
			o.st = st
		}
	}()
	return func() { <-o.done }
}

// takeOwnRead hands the own-node read over to a grant: its lease (nil if
// there was no read) and its outcome. A read lost with its connection is
// dropped, and the caller reads again (nil lease).
func (fw *fastWait) takeOwnRead() (*lease, *zk.Stat, error) {
	o := fw.own
	if o == nil {
		return nil, nil, nil
	}
	fw.own = nil
	if isConnErr(o.err) {
		fw.q.s.dropLease(o.l)
		return nil, nil, nil
	}
	return o.l, o.st, o.err
}

// dropOwnRead drops the own-node read's lease, if it was not granted. Its
// watch stays set at the server until the node changes or goes (rule 6).
func (fw *fastWait) dropOwnRead() {
	if fw.own != nil {
		fw.q.s.dropLease(fw.own.l)
		fw.own = nil
	}
}

// prefetch is the request a waiter with an early lease sends next, sent
// as its watch fires, from go-zookeeper's event callback (on a worker: the
// callback must not block), so that the waiter's goroutine, woken by the
// same event, is not on the path from the event to the request: the
// skip's own-node read when the skip applies and the wakeup is a deletion,
// otherwise the re-list with its child slot (registered before it is
// sent). Both are sent after the event was delivered, as the waiter's own
// would be. The loop takes the result as its own request's (fetched,
// fetchedRead); one that failed is sent again the plain way.
type prefetch struct {
	read     bool
	slot     *childSlot
	done     chan struct{}
	children []string // valid once done is closed, if err is nil
	st       *zk.Stat // likewise
	err      error
}

// prefetcher returns the function that sends the prefetch as the watch
// fires (under Session.mu; see wakeup.then), or nil without an early
// lease.
func (fw *fastWait) prefetcher(t *Ticket, skip bool) func(*wakeup) bool {
	fw.pf = nil
	pre := fw.pre
	if pre == nil {
		return nil
	}
	q, s := fw.q, fw.q.s
	return func(w *wakeup) bool {
		if s.closed || pre.ctx.Err() != nil {
			return false // nothing sent: the loop's own request reports why
		}
		p := &prefetch{read: skip && w.deleted, done: make(chan struct{})}
		if !p.read {
			p.slot = &childSlot{dir: q.adir, l: pre}
			s.leases.dropSlotLocked(pre.child)
			pre.child = p.slot
			s.leases.addSlotLocked(p.slot)
		}
		fw.pf = p // read by the waiter after the wakeup's channel is closed
		s.pool.run(func() {
			defer close(w.ch)
			defer close(p.done)
			// Results are published only on success, as call's are.
			if p.read {
				_, st, _, err := s.conn.GetW(t.path)
				p.st, p.err = st, err
			} else {
				children, _, _, err := s.conn.ChildrenW(q.adir)
				p.children, p.err = children, err
			}
		})
		return true
	}
}

// take returns the prefetch of the given kind, once; nil if none.
func (fw *fastWait) take(read bool) *prefetch {
	p := fw.pf
	if p == nil || p.read != read {
		return nil
	}
	fw.pf = nil
	return p
}

// await waits for p's reply; false if ctx ended or the Session closed
// first (the loop's own request then reports why).
func (p *prefetch) await(ctx context.Context, quit <-chan struct{}) bool {
	select {
	case <-p.done:
		return true
	case <-ctx.Done():
	case <-quit:
	}
	return false
}

// fetched returns the prefetched re-list, if there is one and it
// succeeded; its child slot is then the one the listing set.
func (fw *fastWait) fetched(ctx context.Context) ([]string, bool) {
	p := fw.take(false)
	if p == nil || !p.await(ctx, fw.q.s.quit) || p.err != nil {
		return nil, false
	}
	fw.slot, fw.watched = p.slot, true
	return p.children, true
}

// fetchedRead returns the prefetched skip read, if there is one and it
// was answered: its Stat, or its error if it is not a connection error.
func (fw *fastWait) fetchedRead(ctx context.Context) (*zk.Stat, error, bool) {
	p := fw.take(true)
	if p == nil || !p.await(ctx, fw.q.s.quit) || isConnErr(p.err) {
		return nil, nil, false
	}
	return p.st, p.err, true
}
