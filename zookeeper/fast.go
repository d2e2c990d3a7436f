package zookeeper

import (
	"context"
)

// The fast paths of an Acquire (this file: those of the create and the
// grant; wake.go: those of the wakeup), called from join and from the core
// loop in wait.go at named points. Each saves a round trip and none changes what is
// decided; a fast path that does not apply falls back to the loop's plain
// step.
//
//   - create2 token: the create is sent as create2, whose reply carries the
//     node's Stat (owner, czxid): the lease is prepared without a read
//     (docs/zookeeper-client.md#the-create2-token).
//   - pipelined listing: the first listing is sent right behind the create
//     and used only if it shows the caller's node.
//   - child-watch stand-in: a listing with a child watch on the directory
//     stands in for the own-node watch of a lease granted on it
//     (docs/zookeeper-client.md#the-child-watch-stand-in).
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
	q       *Queue
	list    *listing   // the listing pipelined behind the create
	pre     *lease     // the early lease, from the create2 reply's Stat
	childOK bool       // an Acquire that waits: the listing may set the child watch
	child   *childSlot // the listing's child watch, if it sets one
}

type listing struct {
	done     chan struct{} // capacity 1: one send when the listing returns
	children []string
	dv       dirVersion // the directory's, at the listing
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
	if anchor != nil || q.d.reqSize > defaultMaxPacket {
		return nil
	}
	return &fastStart{q: q, childOK: wait}
}

// discard gives up all of fs: the listing, the early lease's Stat and the
// child watch (the node was created under another session).
func (fs *fastStart) discard() {
	if fs != nil {
		fs.q.d.s.leases.dropSlot(fs.child)
		*fs = fastStart{}
	}
}

// dropChildSlot gives up fs's child watch only (no early lease to cover);
// the pipelined listing is kept.
func (fs *fastStart) dropChildSlot() {
	if fs != nil {
		fs.q.d.s.leases.dropSlot(fs.child)
		fs.child = nil
	}
}

// fastWait is the fast-path state of one wait: the pipelined listing until
// used, the early lease until granted or dropped, and the own-node read
// sent with the current listing. Without fs (a Ticket's Await, an anchored
// Acquire) a wait takes only the last.
type fastWait struct {
	q       *Queue
	first   []string   // the pipelined listing
	firstDV dirVersion // the directory's version at it
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
				fw.first, fw.firstDV = fs.list.children, fs.list.dv
			}
			fs.list = nil // not kept alive while waiting
		case <-ctx.Done():
		case <-q.d.s.quit:
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
		fw.q.d.s.leases.drop(fw.pre) // and its child watch
		fw.pre, fw.slot = nil, nil
	}
}

// piped returns the pipelined listing and the directory's version at it,
// once.
func (fw *fastWait) piped() ([]string, dirVersion, bool) {
	if fw.first == nil {
		return nil, dirVersion{}, false
	}
	children := fw.first
	fw.first = nil
	fw.watched = fw.pre != nil && fw.slot != nil
	return children, fw.firstDV, true
}

// relistSlot returns the child watch a re-list sets: a waiter with an early
// lease re-lists with one, which stands in for its own-node watch if the
// listing grants it. Nil otherwise.
func (fw *fastWait) relistSlot() *childSlot {
	if fw.pre == nil {
		return nil
	}
	fw.slot = fw.q.d.s.leases.addSlotFor(fw.q.d.adir, fw.pre)
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
		fw.q.d.s.leases.useSlot(fw.slot)
		l, err = fw.q.d.activate(ep, fw.pre, nil)
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
		fw.q.d.s.leases.dropSlot(fw.slot)
	}
}

// ended is done when the early lease ends (its node was deleted).
func (fw *fastWait) ended() <-chan struct{} {
	if fw.pre == nil {
		return nil
	}
	return fw.pre.Context().Done()
}
