package zookeeper

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Calls: the acquire path's requests (listings, reads with a watch,
// deletes) sent as requests of our own on go-zookeeper's connection
// (docs/zookeeper-client.md#requests-of-our-own), not through
// go-zookeeper's synchronous calls. The caller writes its request itself
// and waits for the reply, its context's end or the Session's close; the
// reply is decoded on the reading goroutine, which wakes it: no worker
// goroutine in between, and a caller that stops waiting leaves the request
// in flight, its reply handled as any other. A connection that ends fails
// its calls with errLostConn (sent, maybe applied); a call made while no
// connection is ready fails with errNotConnected (not sent). The watches
// they set are kept by the hub and set again after a reconnection in the
// same session (hub.go), as go-zookeeper does its own.

// ownCall is one call in flight.
type ownCall struct {
	watch   watchKind // the watch the request sets, if watches
	watches bool
	parse   func(body []byte) bool // decodes a successful reply; nil: none
	then    func(err error)        // if set: called just before done is closed, on the reading goroutine (or, at a connection's end, one of its own, under no lock); must not block
	done    chan struct{}
	err     error       // valid once done is closed
	ended   atomic.Bool // finish ran
}

// errLostConn is a call's error when its connection ended before the
// reply: the request may have been applied.
var errLostConn = fmt.Errorf("%w: the connection ended before the reply", zk.ErrConnectionClosed)

// replied handles the reply: the header hd, and the body (valid during
// the call only).
func (c *ownCall) replied(hd zkwire.ReplyHeader, body []byte) {
	err := replyError(hd.Err)
	if err == nil && c.parse != nil && !c.parse(body) {
		err = errMalformed(0, body)
	}
	c.finish(err)
}

// finish ends c with err: then first, so that a waiter woken by done
// finds what then did.
func (c *ownCall) finish(err error) {
	if c.ended.Swap(true) {
		return // never: a call is answered, lost or not sent, once
	}
	c.err = err
	if c.then != nil {
		c.then(err)
	}
	close(c.done)
}

// watchSet reports the watch the reply with error code code leaves set:
// a read's on success; an exists' on a missing node too (then an exist
// watch; else a data watch).
func (c *ownCall) watchSet(code int32) (watchKind, bool) {
	const noNode = -101
	switch {
	case !c.watches:
	case c.watch == existWatch && code == 0:
		return dataWatch, true
	case code == 0 || (c.watch == existWatch && code == noNode):
		return c.watch, true
	}
	return 0, false
}

// start sends c's request (op on the server path path, then tail).
func (s *Session) start(c *ownCall, op int32, path string, tail []byte) error {
	return s.startAll(callReq{c, op, path, tail})
}

// callReq is a call's request: op on the server path path, then tail.
type callReq struct {
	c    *ownCall
	op   int32
	path string
	tail []byte
}

// startAll sends the requests of several calls in one write, in order.
func (s *Session) startAll(rs ...callReq) error {
	var buf [2]outgoing
	os := buf[:0]
	for _, r := range rs {
		r.c.done = make(chan struct{})
		os = append(os, outgoing{r: ownRequest{op: r.op, path: r.path, call: r.c}, tail: r.tail})
	}
	if err := s.wire.hub.sendAll(s.wire.cur.Load(), os, nil); err != nil {
		return fmt.Errorf("%w: %w", errNotConnected, err)
	}
	return nil
}

// wait waits for c's reply: nil, the server's error (go-zookeeper's), a
// connection error, ctx's cause or recipe.ErrSessionClosed.
func (c *ownCall) wait(ctx context.Context, quit <-chan struct{}) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-quit:
		return recipe.ErrSessionClosed
	}
}

// do sends c's request and waits for its reply.
func (s *Session) do(ctx context.Context, c *ownCall, op int32, path string, tail []byte) error {
	if err := s.start(c, op, path, tail); err != nil {
		return err
	}
	return c.wait(ctx, s.quit)
}

// childrenCall is a listing of path (setting a child watch if watch); its
// names, and path's version from the same reply's Stat in dv, are valid
// once it succeeded.
func childrenCall(watch bool, names *[]string, dv *dirVersion) *ownCall {
	return &ownCall{watch: childWatch, watches: watch, parse: func(b []byte) bool {
		var ok bool
		var st zk.Stat
		*names, st, ok = zkwire.ParseChildren2(b)
		*dv = dirVersion{czxid: st.Czxid, version: st.Version}
		return ok
	}}
}

// children lists path (setting a child watch if watch).
func (s *Session) children(ctx context.Context, path string, watch bool) ([]string, error) {
	names, _, err := s.childrenVersion(ctx, path, watch)
	return names, err
}

// childrenVersion lists path (setting a child watch if watch), with path's
// version at the listing.
func (s *Session) childrenVersion(ctx context.Context, path string, watch bool) ([]string, dirVersion, error) {
	// names and dv are written by the reply, which may come after an
	// error return (ctx ended): read only on success.
	var names []string
	dv := new(dirVersion)
	if err := s.do(ctx, childrenCall(watch, &names, dv), zkwire.OpGetChildren2, path, zkwire.Bool(watch)); err != nil {
		return nil, dirVersion{}, err
	}
	return names, *dv, nil
}

// statCall is a getData of a node (setting a data watch if watch) that
// keeps its Stat only, in st, valid once it succeeded.
func statCall(watch bool, st *zk.Stat) *ownCall {
	return &ownCall{watch: dataWatch, watches: watch, parse: func(b []byte) bool {
		if len(b) < 4 {
			return false
		}
		n := max(int(int32(binary.BigEndian.Uint32(b[0:4]))), 0)
		if len(b) < 4+n+zkwire.StatLen {
			return false
		}
		*st = zkwire.DecodeStat(b[4+n:])
		return true
	}}
}

// stat reads path's Stat with a getData (setting a data watch if watch).
func (s *Session) stat(ctx context.Context, path string, watch bool) (*zk.Stat, error) {
	st := new(zk.Stat)
	if err := s.do(ctx, statCall(watch, st), zkwire.OpGetData, path, zkwire.Bool(watch)); err != nil {
		return nil, err
	}
	return st, nil
}

// exists reads whether path exists, and its Stat (setting a watch if
// watch: a data watch on a node, an exist watch on a missing one).
func (s *Session) exists(ctx context.Context, path string, watch bool) (bool, *zk.Stat, error) {
	st := new(zk.Stat)
	c := &ownCall{watch: existWatch, watches: watch, parse: func(b []byte) bool {
		if len(b) < zkwire.StatLen {
			return false
		}
		*st = zkwire.DecodeStat(b)
		return true
	}}
	err := s.do(ctx, c, zkwire.OpExists, path, zkwire.Bool(watch))
	switch {
	case err == nil:
		return true, st, nil
	case err == zk.ErrNoNode:
		return false, nil, nil
	}
	return false, nil, err
}

// remove deletes path if its version is version (-1: any).
func (s *Session) remove(ctx context.Context, path string, version int32) error {
	return s.do(ctx, &ownCall{}, zkwire.OpDelete, path, zkwire.Int32(version))
}
