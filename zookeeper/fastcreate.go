package zookeeper

import (
	"context"
	"path"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
)

// The create's fast path (fast.go lists them all): an Acquire's first
// create is a call (owncall.go) sent as create2, whose reply carries the
// node's Stat (docs/zookeeper-client.md#the-create2-token), with the
// listing behind it in the same write, on the caller's goroutine. Anything
// unusual (a directory to check or make, a connection lost or missing)
// goes on in protectedCreate's plain attempts, on a worker.

// createPipe is the create2 call of an Acquire and the listing sent
// behind it.
type createPipe struct {
	fs      *fastStart
	watch   bool // the listing sets the child watch
	sent    bool // the listing was sent
	replied bool // the create2 reply came, with rpath and st
	rpath   string
	st      zk.Stat
	list    *ownCall // the listing's call, once made
}

// pipe prepares the listing behind an Acquire's create: with a child watch
// when the queue was last found uncontended. Nil without fs.
func (fs *fastStart) pipe() *createPipe {
	if fs == nil {
		return nil
	}
	q := fs.q
	if fs.childOK && q.solo.Load() {
		fs.child = q.d.s.leases.addSlot(q.d.adir)
	}
	fs.list = &listing{done: make(chan struct{}, 1)}
	return &createPipe{fs: fs, watch: fs.child != nil}
}

// listing is the listing's call, to send right behind the create.
func (p *createPipe) listing() callReq {
	q, lst := p.fs.q, p.fs.list
	c := childrenCall(p.watch, &lst.children, &lst.dv)
	c.then = func(err error) {
		lst.err = err
		lst.done <- struct{}{}
	}
	p.list = c
	return callReq{c, zkwire.OpGetChildren2, q.d.adir, zkwire.Bool(p.watch)}
}

// finish ends the pipe after the create returned name, err: it returns the
// create2 reply's Stat if it is the reply to that create. A listing never
// sent is dropped, and so is the child watch when no early lease can use it.
func (p *createPipe) finish(name string, err error) (zk.Stat, bool) {
	if p == nil {
		return zk.Stat{}, false
	}
	fs := p.fs
	if !p.sent {
		fs.list = nil
	}
	ok := p.replied && err == nil && path.Base(p.rpath) == name
	if fs.child != nil && (fs.list == nil || !ok) {
		fs.q.d.s.leases.dropSlot(fs.child)
		fs.child = nil
	}
	if !ok {
		// Unless replied, a late reply may be writing it.
		return zk.Stat{}, false
	}
	return p.st, true
}

// first is the first create of an Acquire, as a call with the listing
// behind it. done reports an outcome (the node's name, or err); else the
// plain attempts go on (c.unknown set if a create may have been applied).
// abandoned: ctx ended with the create in flight, whose reply exits the
// gate and hands its outcome to late.
func (c *protectedCreate) first(ctx context.Context, p *createPipe) (done, abandoned bool, err error) {
	q, s := c.q, c.q.s
	if c.anchor != nil || c.sends.size > defaultMaxPacket || (s.dirs.enabled(s.cfg.acl) && !s.dirs.trusted(q.adir)) {
		return false, false, nil
	}
	if !c.gate.enter() {
		return true, false, errCreateStopped
	}
	var state atomic.Int32 // 0: waited for, 1: answered, 2: abandoned
	call := &ownCall{parse: func(b []byte) bool {
		var ok bool
		p.rpath, p.st, ok = zkwire.ParseCreate2(b)
		return ok
	}}
	call.then = func(err error) {
		c.gate.exit()
		if !state.CompareAndSwap(0, 1) {
			if err == nil {
				c.name = path.Base(p.rpath)
			}
			go c.late(err)
		}
	}
	tail := zkwire.CreateTail(c.data, s.cfg.acl, zk.FlagEphemeral|zk.FlagSequence)
	if err := s.startAll(callReq{call, zkwire.OpCreate2, c.prefix, tail}, p.listing()); err != nil {
		c.gate.exit()
		return false, false, nil
	}
	p.sent = true
	// The listing is answered after the create: waiting for it wakes the
	// caller once for both. A connection's end fails both, in any order.
	err = p.list.wait(ctx, s.quit)
	if !isDone(call) && isDone(p.list) {
		<-call.done
	}
	if !isDone(call) { // ctx ended, or the Session closed
		if state.CompareAndSwap(0, 2) {
			return true, true, err
		}
		<-call.done
	}
	return c.answered(call.err, p)
}

// isDone reports whether c's reply (or connection end) was handled.
func isDone(c *ownCall) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// answered turns the first create's outcome into first's.
func (c *protectedCreate) answered(err error, p *createPipe) (done, abandoned bool, _ error) {
	switch {
	case err == nil:
		p.replied = true
		c.name = path.Base(p.rpath)
		return true, false, nil
	case isConnErr(err):
		if lostAfterSend(err) {
			c.unknown = true
			if gerr := c.sends.note(err); gerr != nil {
				return true, false, gerr
			}
		}
		return false, false, nil
	case err == zk.ErrNoNode:
		return false, false, nil // the plain attempts make the directory
	}
	return true, false, err
}
