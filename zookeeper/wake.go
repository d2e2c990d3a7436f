package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// The wakeup's fast paths (see fast.go for the list): the re-list skip,
// the own-node read beside a listing, and the prefetch of the wakeup's
// request from the event callback. docs/design.md#one-round-trip-per-hand-off.

// skipCandidate is the re-list skip's condition on the listing: the Rule is
// declared to grant the lowest node, the queue has no anchored nodes and
// its Rule does not change with the directory's data (RuleFromDirData),
// the caller's node is second and watches the first, and the Rule grants
// it on the listing without the first. It is decided before waiting, so
// that the listing is not kept alive while waiting; only a waiter with an
// early lease skips. See docs/design.md#waking-and-the-re-list-skip.
func (c *ruleContract) skipCandidate(nodes []NodeName, self int, watch []int) bool {
	if !c.grantsLowest || c.anchors || c.fromDir != nil || self != 1 || len(watch) != 1 || watch[0] != 0 {
		return false
	}
	for _, n := range nodes {
		if n.Anchored {
			return false
		}
	}
	holds, _, err := c.decide(nodes[1:], 0)
	return holds && err == nil // a Rule that panics here: no skip; the re-list asks it again
}

// grantOnSkip is the wakeup after the only predecessor's deletion, for a
// skip candidate: a getData with watch on the own node, sent after the
// deletion was seen, confirms it (same czxid and owner) and sets the
// lease's own-node watch in the same request; the early lease is then
// granted. It returns (nil, nil) when the loop must list again.
func (fw *fastWait) grantOnSkip(ctx context.Context, ep *epoch, t *Ticket) (*lease, error) {
	q, pre := fw.q, fw.pre
	st, err, fetched := fw.fetchedRead(ctx)
	if !fetched {
		err = q.d.s.req.retryOwn(ctx, &lostSends{size: q.d.reqSize}, func(ctx context.Context) (err error) {
			st, err = q.d.s.stat(ctx, t.path, true)
			return err
		})
	}
	ok := err == nil
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	if err != nil {
		return nil, q.d.wrap("get", err)
	}
	if !ok || !pre.isNode(st) {
		return nil, nil
	}
	q.d.s.leases.ownWatchRead(pre, st.Version)
	l, err := q.d.activate(ep, pre, nil)
	fw.pre, fw.slot = nil, nil
	if err != nil || l != nil {
		return l, err
	}
	return nil, q.d.s.conns.awaitConnected(ctx)
}

// ownRead is the own-node read beside a listing: a waiter without an early
// lease (a Ticket's Await, an anchored Acquire, an Acquire whose create2
// Stat was not usable) reads its node with a data watch while it lists, on
// a lease registered before the read is sent, so that a listing that
// grants needs no second round trip. See
// docs/design.md#one-round-trip-per-hand-off.
type ownRead struct {
	l   *lease
	st  *zk.Stat // valid once waited for, if err is nil
	err error
}

// readOwn sends the own-node read for the listing about to be sent, if
// the wait has no early lease and blocks (a TryAcquire's refusal would
// waste it), and returns the function that waits for its reply.
func (fw *fastWait) readOwn(ctx context.Context, t *Ticket) (wait func()) {
	fw.dropOwnRead()
	if fw.pre != nil || !fw.block {
		return func() {}
	}
	s := fw.q.d.s
	o := &ownRead{l: s.leases.prepare(ctx, t.leaseNode())}
	fw.own = o
	// st is written by the call's reply, which may come after an error
	// return: published only on success.
	st := new(zk.Stat)
	c := statCall(true, st)
	if o.err = s.start(c, zkwire.OpGetData, t.path, zkwire.Bool(true)); o.err != nil {
		return func() {}
	}
	return func() {
		if o.err = c.wait(ctx, s.quit); o.err == nil {
			o.st = st
		}
	}
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
		fw.q.d.s.leases.drop(o.l)
		return nil, nil, nil
	}
	return o.l, o.st, o.err
}

// dropOwnRead drops the own-node read's lease, if it was not granted. Its
// watch stays set at the server until the node changes or goes (rule 6).
func (fw *fastWait) dropOwnRead() {
	if fw.own != nil {
		fw.q.d.s.leases.drop(fw.own.l)
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
	children []string   // valid once done is closed, if err is nil
	dv       dirVersion // likewise: the directory's version at the re-list
	st       *zk.Stat   // likewise: the skip's read
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
	q, s := fw.q, fw.q.d.s
	return func(w *wakeup) bool {
		if s.mu.closed || !pre.Live() {
			return false // nothing sent: the loop's own request reports why
		}
		p := &prefetch{read: skip && w.deleted, done: make(chan struct{})}
		if !p.read {
			p.slot = s.leases.addSlotForLocked(q.d.adir, pre) // the registry edits the lease
		}
		fw.pf = p // read by the waiter after the wakeup's channel is closed
		var c *ownCall
		var op int32
		var path string
		if p.read {
			p.st = new(zk.Stat)
			c, op, path = statCall(true, p.st), zkwire.OpGetData, t.path
		} else {
			c, op, path = childrenCall(true, &p.children, &p.dv), zkwire.OpGetChildren2, q.d.adir
		}
		// Answered on the reading goroutine, which wakes the waiter once,
		// with the reply in hand. Written once Session.mu is released.
		end := func(err error) {
			p.err = err
			close(p.done)
			close(w.ch)
		}
		c.then = end
		s.mu.afterUnlock(func() {
			if err := s.start(c, op, path, zkwire.Bool(true)); err != nil {
				end(err)
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

// fetched returns the prefetched re-list and the directory's version at
// it, if there is one and it succeeded; its child slot is then the one the
// listing set.
func (fw *fastWait) fetched(ctx context.Context) ([]string, dirVersion, bool) {
	p := fw.take(false)
	if p == nil || !p.await(ctx, fw.q.d.s.quit) || p.err != nil {
		return nil, dirVersion{}, false
	}
	fw.slot, fw.watched = p.slot, true
	return p.children, p.dv, true
}

// fetchedRead returns the prefetched skip read, if there is one and it
// was answered: its Stat, or its error if it is not a connection error.
func (fw *fastWait) fetchedRead(ctx context.Context) (*zk.Stat, error, bool) {
	p := fw.take(true)
	if p == nil || !p.await(ctx, fw.q.d.s.quit) || isConnErr(p.err) {
		return nil, nil, false
	}
	return p.st, p.err, true
}
