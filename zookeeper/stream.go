package zookeeper

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ErrUnimplemented is the error of a request the server does not know
// (addWatch before ZooKeeper 3.6).
var ErrUnimplemented = errors.New("zookeeper: the server does not implement the request")

// Stream is a Session's ordered feed, for recipes that must see the
// replies to their reads in the order of the watch events around them (a
// cache): the replies to the requests it sends, every watch event, and the
// connections' starts and ends, queued in the order the client read them,
// which is the order the server sent them
// (docs/zookeeper-client.md#requests-of-our-own). Paths are below the
// chroot; events outside it are left out. Its methods are safe for
// concurrent use; Close it when done.
type Stream struct {
	s    *Session
	mu   sync.Mutex
	q    []StreamItem
	wake chan struct{}
	done bool
}

// StreamKind is the kind of a StreamItem.
type StreamKind int

// The kinds of StreamItem.
const (
	// StreamConnected: a connection began in Session (a new session when
	// it differs from the last one's). Requests sent before it are not
	// answered on it.
	StreamConnected StreamKind = iota + 1
	// StreamClosed: the connection ended; no request unanswered will be.
	StreamClosed
	// StreamReply: the reply to request ID.
	StreamReply
	// StreamEvent: a watch event.
	StreamEvent
	// StreamEnded: the Session was closed; nothing follows.
	StreamEnded
)

// StreamItem is one thing a Stream read.
type StreamItem struct {
	Kind    StreamKind
	Session int64        // StreamConnected: the session's ID
	ID      uint64       // StreamReply: the request's ID, as its send returned
	Zxid    int64        // the reply's zxid; the event's (-1 before ZooKeeper 3.9)
	Err     error        // StreamReply: nil, or the server's error (zk.ErrNoNode, ErrUnimplemented, ...)
	Path    string       // StreamReply, StreamEvent: the node's path
	Type    zk.EventType // StreamEvent: its type
	Data    []byte       // StreamReply to GetData
	Stat    zk.Stat      // StreamReply to GetData, Children, Exists
	Names   []string     // StreamReply to Children: the children's names
}

type watchSpec struct {
	path      string
	recursive bool
}

// NewStream opens a Stream on s. Errors: recipe.ErrSessionClosed.
func (s *Session) NewStream() (*Stream, error) {
	if s.isClosed() {
		return nil, recipe.ErrSessionClosed
	}
	st := &Stream{s: s, wake: make(chan struct{}, 1)}
	s.wire.hub.add(st)
	if s.isClosed() { // closed meanwhile: its StreamEnded may have missed st
		st.push(StreamItem{Kind: StreamEnded})
	}
	return st, nil
}

// Check reports whether requests on path can be sent: nil, or a
// *PathError matching recipe.ErrInvalidPath (not absolute) or also
// recipe.ErrTooLarge (its requests would exceed the packet limit, and a
// server would close the connection on them).
func (st *Stream) Check(path string) error {
	if !strings.HasPrefix(path, "/") {
		return &PathError{Path: path, Reason: "not absolute"}
	}
	if need := len(st.s.chroot+path) + pathSlack; need > st.s.limit.max {
		return &PathError{Path: path, Reason: fmt.Sprintf("too long: its requests need %d bytes, over the session's packet limit of %d bytes", need, st.s.limit.max), Err: recipe.ErrTooLarge}
	}
	return nil
}

// Wake returns a channel that receives a value after items were queued.
func (st *Stream) Wake() <-chan struct{} { return st.wake }

// Next takes the items queued, oldest first.
func (st *Stream) Next() []StreamItem {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.q
	st.q = nil
	return q
}

// push queues it and wakes the reader.
func (st *Stream) push(it StreamItem) {
	st.mu.Lock()
	if !st.done {
		st.q = append(st.q, it)
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// GetData sends a getData of path (setting a data watch if watch) and
// returns the request's ID. Errors: Check's; ErrNotConnected
// while no connection is ready (wait for StreamConnected).
func (st *Stream) GetData(path string, watch bool) (uint64, error) {
	return st.send(zkwire.OpGetData, path, zkwire.Bool(watch))
}

// Children sends a getChildren2 of path (setting a child watch if watch).
// Errors as GetData.
func (st *Stream) Children(path string, watch bool) (uint64, error) {
	return st.send(zkwire.OpGetChildren2, path, zkwire.Bool(watch))
}

// Exists sends an exists of path (setting a watch if watch). Errors as
// GetData.
func (st *Stream) Exists(path string, watch bool) (uint64, error) {
	return st.send(zkwire.OpExists, path, zkwire.Bool(watch))
}

// AddWatch sends an addWatch of a persistent watch on path (recursive: on
// its subtree too; ZooKeeper 3.6+; ErrUnimplemented before), removed at
// Close. Watches live per connection: add it again after each
// StreamConnected. Errors as GetData.
func (st *Stream) AddWatch(path string, recursive bool) (uint64, error) {
	mode := zkwire.AddWatchPersistent
	if recursive {
		mode = zkwire.AddWatchPersistentRecursive
	}
	id, err := st.send(zkwire.OpAddWatch, path, zkwire.Int32(mode))
	if err == nil {
		st.s.wire.hub.holdWatch(st, watchSpec{path, recursive})
	}
	return id, err
}

// Close stops the Stream and removes its persistent watches from the
// server unless another Stream of the Session holds the same one.
// Idempotent.
func (st *Stream) Close() {
	st.mu.Lock()
	done := st.done
	st.done, st.q = true, nil
	st.mu.Unlock()
	if done {
		return
	}
	for _, w := range st.s.wire.hub.remove(st) {
		st.s.removeWatch(w)
	}
}

// removeWatch removes the persistent watch w from the current connection
// (a watch on a connection that ended is gone with it). ZooKeeper 3.9 can
// remove one persistent watch; before, the server knows only "every watch
// of the connection on the path", which would also remove the one-shot
// watches the Session's recipes wait on there: then the watch is removed
// only if the Session has none on that path, else it stays until the
// connection ends (its events are dropped).
func (s *Session) removeWatch(w watchSpec) {
	typ := zkwire.WatcherPersistent
	if w.recursive {
		typ = zkwire.WatcherPersistentRecursive
	}
	c, path := s.wire.cur.Load(), s.chroot+w.path
	h := &s.wire.hub
	h.sendThen(c, zkwire.OpRemoveWatches, path, zkwire.Int32(typ), func(code int32) {
		const noWatcher = -121
		if code == 0 || code == noWatcher || s.watchesOn(path) || h.watched(path) || h.held(w.path) {
			return
		}
		go h.sendThen(c, zkwire.OpRemoveWatches, path, zkwire.Int32(zkwire.WatcherAny), nil)
	})
}

// watchesOn reports whether the Session's recipes wait on a watch on
// path (a server path).
func (s *Session) watchesOn(path string) bool {
	s.mu.Lock()
	defer s.mu.unlock()
	for _, k := range []watchKind{dataWatch, childWatch, existWatch} {
		if s.watches.byKey[watchKey{k, path}] != nil {
			return true
		}
	}
	return false
}

// ErrNotConnected is a Stream request's error while the Session has no
// connection ready for requests.
var ErrNotConnected = errors.New("zookeeper: no connection ready for requests")

// send sends op on path (below the chroot) on the current connection.
func (st *Stream) send(op int32, path string, tail []byte) (uint64, error) {
	if err := st.Check(path); err != nil {
		return 0, err
	}
	full := st.s.chroot + path
	return st.s.wire.hub.send(st.s.wire.cur.Load(), ownRequest{st: st, op: op, path: full}, tail)
}
