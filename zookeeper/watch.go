package zookeeper

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// watchKind is the ZooKeeper watch a nodeWatch holds.
type watchKind uint8

const (
	dataWatch  watchKind = iota // getData: fires on delete and data change
	childWatch                  // getChildren: fires on a child created or deleted, and on delete
	existWatch                  // exists on a missing node: fires on create
)

// watchKey names one server watch: its kind and absolute path.
type watchKey struct {
	kind watchKind
	path string
}

// nodeWatch is the one watch of a kind a Session keeps on a znode path,
// shared by every waiter of the Session that waits on that path.
// go-zookeeper cannot remove a watch: without sharing, each waiter that gives
// up (ctx ended) would leave one more registration behind until the node
// changes. With it, a path costs one server watch and one client
// registration however many waiters come and go.
type nodeWatch struct {
	armed   bool // the watch is set at the server
	waiters map[*wakeup]struct{}
}

// wakeup is one waiter's signal; it may be registered on several watches
// and is closed by whichever fires first.
type wakeup struct {
	ch      chan struct{}
	once    sync.Once
	deleted bool  // set before ch is closed: fired because a watched data node does not exist any more
	err     error // set before ch is closed: fired because a watch could not be set (watchAsync)
	// then, if set, runs once as the wakeup fires, under Session.mu (in
	// go-zookeeper's event callback, or in watchPath): it must not block.
	// It sends the waiter's next request (prefetch); when it reports true,
	// it closes ch itself once that request is answered, so the waiter
	// wakes once, with the reply in hand.
	then func(w *wakeup) (closesLater bool)
}

// fire is called under Session.mu.
func (w *wakeup) fire(deleted bool, err error) {
	w.once.Do(func() {
		w.deleted, w.err = deleted, err
		if w.then != nil && w.then(w) {
			return
		}
		close(w.ch)
	})
}

// watchNodes waits on several znodes at once: it returns a channel that is
// closed when any of the znodes at paths (absolute) is deleted or changed,
// when a watch is dropped (session expiry), or at once if one of them does
// not exist; then (may be nil) runs as it fires (see wakeup). stop
// deregisters the caller and must be called when it stops waiting. The
// watches are data watches (getData), which leave nothing behind on a
// missing node and are certain to fire for the ephemeral nodes the recipes
// watch.
func (r *watchRegistry) watchNodes(ctx context.Context, then func(*wakeup) bool, paths ...string) (*wakeup, func(), error) {
	w := &wakeup{ch: make(chan struct{}), then: then}
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	for _, p := range paths {
		f, err := r.watchAsync(ctx, w, p)
		if err != nil {
			stop()
			return nil, nil, err
		}
		stops = append(stops, f)
	}
	return w, stop, nil
}

// watchAsync is watchPath for a waiter's data watch on path, without
// waiting for the request that sets it, so that the waiter's goroutine
// sleeps at once and is woken once: the reply settles the watch on the
// reading goroutine. Set, it is armed; the node missing, it fires as a
// deletion; a connection lost, it fires (the waiter lists again, which
// waits for the connection); any other refusal fires it with that error
// (wakeup.err). Without a connection, it is watchPath.
func (r *watchRegistry) watchAsync(ctx context.Context, w *wakeup, path string) (func(), error) {
	key := watchKey{dataWatch, path}
	nw, armed, stop, err := r.join(key, w)
	if err != nil || armed {
		return stop, err
	}
	c := statCall(true, new(zk.Stat))
	c.then = func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.byKey[key] != nw || nw.armed { // fired meanwhile, or set by another
			return
		}
		switch {
		case err == nil:
			nw.armed = true
		case errors.Is(err, zk.ErrNoNode), isConnErr(err):
			r.fireLocked(key, nw, errors.Is(err, zk.ErrNoNode), nil)
		default:
			r.fireLocked(key, nw, false, err)
		}
	}
	if err := r.s.start(c, zkwire.OpGetData, path, zkwire.Bool(true)); err != nil {
		stop()
		return r.watchPath(ctx, w, dataWatch, path)
	}
	return stop, nil
}

// join registers w on the shared watch at key and returns it, whether it is
// set at the server already, and w's deregistration.
func (r *watchRegistry) join(key watchKey, w *wakeup) (nw *nodeWatch, armed bool, stop func(), _ error) {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, false, nil, recipe.ErrSessionClosed
	}
	nw, armed = r.joinLocked(key, w)
	r.mu.Unlock()
	return nw, armed, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.leaveLocked(key, nw, w)
	}, nil
}

// watchRegistry holds the shared watches of a Session, by kind and path,
// and sets them. byKey is under mu.
type watchRegistry struct {
	mu    *sessionLock
	req   *requests
	s     *Session // its calls (owncall.go)
	conn  *zk.Conn // set once Connect has it
	byKey map[watchKey]*nodeWatch
}

// joinLocked registers w on the watch at key (creating it) and reports whether
// the server watch is set already.
func (r *watchRegistry) joinLocked(key watchKey, w *wakeup) (_ *nodeWatch, armed bool) {
	nw := r.byKey[key]
	if nw == nil {
		nw = &nodeWatch{waiters: make(map[*wakeup]struct{})}
		r.byKey[key] = nw
	}
	nw.waiters[w] = struct{}{}
	return nw, nw.armed
}

// leaveLocked deregisters w from nw (if nw is still the watch at key), forgetting
// a watch that is not set and has no waiters left.
func (r *watchRegistry) leaveLocked(key watchKey, nw *nodeWatch, w *wakeup) {
	if r.byKey[key] == nw {
		delete(nw.waiters, w)
		if !nw.armed && len(nw.waiters) == 0 {
			delete(r.byKey, key)
		}
	}
}

// fireLocked wakes every waiter of nw and forgets the watch; err, if set,
// is why the watch could not be set.
func (r *watchRegistry) fireLocked(key watchKey, nw *nodeWatch, deleted bool, err error) {
	delete(r.byKey, key)
	for w := range nw.waiters {
		w.fire(deleted, err)
	}
	nw.waiters = nil
}

// onEventLocked dispatches a watch event to the shared watches it ends.
func (r *watchRegistry) onEventLocked(ev zk.Event) {
	for _, k := range firedKinds(ev.Type) {
		key := watchKey{k, ev.Path}
		if nw := r.byKey[key]; nw != nil {
			r.fireLocked(key, nw, k == dataWatch && ev.Type == zk.EventNodeDeleted, nil)
		}
	}
}

// firedKinds returns the kinds of watch an event of type t ends.
func firedKinds(t zk.EventType) []watchKind {
	switch t {
	case zk.EventNodeDeleted, zk.EventNotWatching:
		return []watchKind{dataWatch, childWatch, existWatch}
	case zk.EventNodeDataChanged:
		return []watchKind{dataWatch, existWatch}
	case zk.EventNodeCreated:
		return []watchKind{existWatch}
	case zk.EventNodeChildrenChanged:
		return []watchKind{childWatch}
	}
	return nil
}

// watchPath registers w on the shared watch of the given kind on path,
// setting the server watch if it is not set yet. A data or children watch
// on a missing node, and an exists watch on a node that exists, fire w at
// once (the caller re-reads). It returns the deregistration.
func (r *watchRegistry) watchPath(ctx context.Context, w *wakeup, kind watchKind, path string) (func(), error) {
	key := watchKey{kind, path}
	nw, armed, stop, err := r.join(key, w)
	if err != nil || armed {
		return stop, err
	}
	exists, err := r.setWatch(ctx, kind, path)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil && !exists:
		if r.byKey[key] == nw { // not fired meanwhile
			nw.armed = true
		}
	case err == nil || errors.Is(err, zk.ErrNoNode):
		// Gone already (or, for an exists watch, there already): everybody
		// re-reads. An exists watch on a node that exists is a data watch
		// at the server; it stays registered in go-zookeeper until the node
		// changes, and is not tracked here.
		if r.byKey[key] == nw {
			r.fireLocked(key, nw, kind == dataWatch && err != nil, nil)
		}
	default:
		r.leaveLocked(key, nw, w)
		return nil, err
	}
	return stop, nil
}

// setWatch sends the request that sets a watch of kind on path, retrying
// connection losses. exists reports an exists watch's node there already.
func (r *watchRegistry) setWatch(ctx context.Context, kind watchKind, path string) (exists bool, _ error) {
	err := r.req.retryOwn(ctx, &lostSends{size: len(path) + pathSlack}, func(ctx context.Context) (err error) {
		switch kind {
		case dataWatch:
			_, err = r.s.stat(ctx, path, true)
		case childWatch:
			_, err = r.s.children(ctx, path, true)
		case existWatch:
			exists, _, err = r.s.exists(ctx, path, true)
		}
		return err
	})
	return exists, err
}
