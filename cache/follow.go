package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/cachestore"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// follower keeps the store equal to the server's nodes, reading them
// through a zookeeper.Stream: the replies to its reads and the watch events
// come in the order the server sent them, so a node's state from a reply
// holds until the next event of that node, and the store is the server's
// state at the last item read whenever no read is outstanding
// (docs/cache.md#why-the-cache-never-lies).
type follower struct {
	st      *zookeeper.Stream
	store   *cachestore.Store
	root    string
	mode    recipe.CacheMode
	oneShot bool // one-shot watches (no addWatch)
	log     *slog.Logger

	reqs  map[uint64]request // outstanding, by ID
	peak  int                // the most outstanding since reqs was made
	ord   ordering
	cause uint64 // of the requests sent now
	// armed: the nodes read since the last connection began (with
	// one-shot watches: whose watches are set); a listing reads the others.
	armed  map[string]bool
	synced bool // the load since the last connection was sent
	// frozen: the connection ended with nothing outstanding, so what is
	// held is the server's state at the last item read, until the next
	// connection's reads change it.
	frozen bool
	// dead: the connection's end was read and no new one began; what
	// comes from it now is ignored.
	dead    bool
	rev     int64 // the newest zxid read
	session int64
}

// request is what an outstanding request asked.
type request struct {
	op    op
	path  string
	cause uint64 // ordering's
}

// key is what the request is counted under while outstanding (order.go).
func (r request) key() string {
	switch r.op {
	case opData:
		return pendingKey(r.path, false)
	case opChildren:
		return pendingKey(r.path, true)
	}
	return ""
}

type op int

const (
	opWatch op = iota
	opData
	opChildren
	opExists
)

// run follows until ctx ends or the Session is closed.
func (f *follower) run(ctx context.Context) {
	f.resync()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.st.Wake():
		}
		for _, it := range f.st.Next() {
			if !f.handle(it) {
				return
			}
		}
		ok := f.frozen || f.synced && !f.ord.pending()
		rev := int64(0) // a point with changes waiting is no point to report
		if ok {
			rev = f.rev
			f.shrink()
		}
		f.store.SetConsistent(ok, rev)
	}
}

// shrink drops, once a large load is read, the maps it grew (a map does
// not shrink: a load of 10,000 nodes kept about 200 bytes a node in them).
// With persistent watches, armed matters only while a load is read.
func (f *follower) shrink() {
	if f.peak < 1024 {
		return
	}
	f.peak = 0
	f.reqs = make(map[uint64]request)
	f.ord.shrink()
	if !f.oneShot {
		f.armed = make(map[string]bool)
	}
}

// handle applies one item; false stops the follower.
func (f *follower) handle(it zookeeper.StreamItem) bool {
	switch {
	case it.Kind == zookeeper.StreamEnded:
		f.store.Stop(recipe.ErrSessionClosed)
		return false
	case it.Kind == zookeeper.StreamConnected:
		if f.session != 0 && it.Session != f.session {
			f.log.Info("cache: a new session: reading the nodes again")
		}
		f.session, f.dead = it.Session, false
		f.resync()
		return true
	case f.dead:
		// Read off a connection after its end was reported (frames it had
		// buffered): not applied, and its zxid must not move Rev past
		// what is held.
		return true
	case it.Kind == zookeeper.StreamClosed:
		f.frozen = f.frozen || f.synced && !f.ord.pending()
		f.reqs = make(map[uint64]request) // unanswered for good
		f.cause = f.ord.reset()
		f.synced, f.dead = false, true
		return true
	}
	if _, ok := f.reqs[it.ID]; it.Kind == zookeeper.StreamReply && !ok {
		return true // sent on a connection that ended
	}
	if it.Zxid > f.rev {
		f.rev = it.Zxid
	}
	switch it.Kind {
	case zookeeper.StreamEvent:
		f.cause = f.ord.next()
		f.event(it)
	case zookeeper.StreamReply:
		r := f.reqs[it.ID]
		delete(f.reqs, it.ID)
		f.cause = r.cause
		err := f.reply(r, it)
		f.ord.answered(r.cause, r.key())
		if err != nil {
			f.log.Error("cache: stopped", "err", err)
			f.store.Stop(err)
			return false
		}
		f.apply()
	}
	return f.store.Err() == nil
}

// resync (re)sets the watch and reads the root and, below it, what the mode
// holds; nodes held but not found are removed as the listings come.
func (f *follower) resync() {
	f.reqs = make(map[uint64]request)
	f.cause = f.ord.reset()
	f.armed = make(map[string]bool)
	f.synced, f.frozen = false, false
	if !f.oneShot && !f.send(opWatch, f.root) {
		return
	}
	if f.load(f.root) {
		f.synced = true
	}
}

// load reads p's data and, if the mode holds its children, its listing.
func (f *follower) load(p string) bool {
	f.armed[p] = true
	if !f.send(opData, p) {
		return false
	}
	return !f.listed(p) || f.send(opChildren, p)
}

// listed reports whether the mode holds the children of p.
func (f *follower) listed(p string) bool {
	switch f.mode {
	case recipe.CacheNode:
		return false
	case recipe.CacheChildren:
		return p == f.root
	}
	return true
}

// holds reports whether the mode holds p.
func (f *follower) holds(p string) bool {
	switch {
	case p == f.root:
		return true
	case f.mode == recipe.CacheNode:
		return false
	case f.mode == recipe.CacheChildren:
		return path.Dir(p) == f.root
	}
	return strings.HasPrefix(p, strings.TrimSuffix(f.root, "/")+"/")
}

// send sends op on p; false when the connection is not ready (a
// StreamConnected will come).
func (f *follower) send(o op, p string) bool {
	var id uint64
	var err error
	switch o {
	case opWatch:
		id, err = f.st.AddWatch(p, f.mode != recipe.CacheNode)
	case opData:
		id, err = f.st.GetData(p, f.oneShot)
	case opChildren:
		id, err = f.st.Children(p, f.oneShot)
	case opExists:
		id, err = f.st.Exists(p, true)
	}
	if errors.Is(err, recipe.ErrTooLarge) {
		// A node the server holds, too long for the Session's packet
		// limit (WithMaxPacket): the cache cannot hold it.
		f.store.Stop(fmt.Errorf("cache of %s: %w", f.root, err))
	}
	if err != nil {
		f.synced = false
		return false
	}
	f.reqs[id] = request{o, p, f.cause}
	f.peak = max(f.peak, len(f.reqs))
	f.ord.sent(f.cause, f.reqs[id].key())
	return true
}

// event handles a watch event: the node is read again, even at a delete,
// so that every change is applied at a reply, whose zxid orders it (an
// event has none before ZooKeeper 3.9), in the order of the events.
func (f *follower) event(it zookeeper.StreamItem) {
	p := it.Path
	if !f.holds(p) {
		return
	}
	switch it.Type {
	case zk.EventNodeCreated:
		if f.oneShot {
			f.load(p) // the root's exists watch fired
		} else {
			f.armed[p] = true // its children come as events too
			f.send(opData, p)
		}
	case zk.EventNodeDataChanged, zk.EventNodeDeleted:
		f.send(opData, p) // a missing node is removed at the reply
	case zk.EventNodeChildrenChanged:
		if f.oneShot && f.listed(p) {
			f.send(opChildren, p)
		}
	}
}

// remove removes p and every node held below it, absent now (in the
// order of causes).
func (f *follower) remove(p string) {
	delete(f.armed, p)
	f.ord.hold(effect{cause: f.cause, del: p, rev: f.rev})
}

// apply applies the changes no outstanding request comes before.
func (f *follower) apply() {
	for _, e := range f.ord.ready() {
		if f.ord.release(e) {
			continue // a newer state of the node follows (order.go)
		}
		if e.del == "" {
			f.store.Put(e.node, e.rev)
			continue
		}
		for _, q := range f.store.Under(e.del) {
			f.store.Delete(q, e.rev)
			delete(f.armed, q)
		}
		f.store.Delete(e.del, e.rev)
	}
}

// reply applies the reply to r. An error is returned when the cache cannot
// go on.
func (f *follower) reply(r request, it zookeeper.StreamItem) error {
	switch {
	case r.op == opWatch && errors.Is(it.Err, zookeeper.ErrUnimplemented):
		f.log.Info("cache: the server has no persistent watches (before ZooKeeper 3.6): following with one-shot watches")
		f.oneShot = true
		f.resync()
		return nil
	case errors.Is(it.Err, zk.ErrNoNode):
		f.remove(r.path)
		if r.op == opData && r.path == f.root && f.oneShot {
			f.send(opExists, r.path)
		}
		return nil
	case errors.Is(it.Err, zk.ErrNoAuth):
		return fmt.Errorf("cache of %s: %w: reading %s", f.root, recipe.ErrNoPermission, r.path)
	case it.Err != nil:
		return fmt.Errorf("cache of %s: reading %s: %w", f.root, r.path, it.Err)
	}
	switch r.op {
	case opData:
		if f.holds(r.path) {
			n := recipe.Node{Path: r.path, Data: it.Data, Created: it.Stat.Czxid, Modified: it.Stat.Mzxid}
			f.ord.hold(effect{cause: r.cause, node: n, rev: f.rev})
		}
	case opChildren:
		f.children(r.path, it.Names)
	case opExists:
		f.load(r.path) // the root exists now
	}
	return nil
}

// children applies the listing of p: children not held are read (with
// their own children, if the mode holds them), held ones not listed are
// gone.
func (f *follower) children(p string, names []string) {
	listed := make(map[string]bool, len(names))
	for _, n := range names {
		c := path.Join(p, n)
		listed[c] = true
		if f.holds(c) && !f.armed[c] {
			f.load(c)
		}
	}
	for _, c := range f.store.Children(p) {
		if !listed[c] {
			f.remove(c)
		}
	}
}
