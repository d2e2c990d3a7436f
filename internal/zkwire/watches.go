package zkwire

import (
	"encoding/binary"
	"sync"
)

// Watches mirrors, from what is written and read on the wire, the watch
// registrations go-zookeeper v1.0.4 keeps in its Conn.watchers map, across
// the connections of one *zk.Conn. After a handshake go-zookeeper writes
// set-watches exactly when that map is not empty (sendSetWatches, conn.go
// line 582), so the read gate holds only when the mirror is not empty
// (docs/design.md#the-read-gate-after-a-reconnect).
//
// go-zookeeper adds a registration when it reads the reply to a request it
// sent with the watch flag (ChildrenW, GetW, ExistsW: their recvFunc,
// conn.go lines 997, 1030, 1210-1212):
//   - getChildren2: a child watch, if the reply has no error;
//   - getData: a data watch, if the reply has no error;
//   - exists: a data watch if the reply has no error, an exist watch if it
//     is NoNode.
//
// It removes registrations only when it reads a watch event
// (notifyWatches, line 534: a node created fires the exist watch; data
// changed: exist and data; children changed: child; deleted: all three)
// and when a handshake refuses the session (invalidateWatches, line 437).
// All of these happen on its receive goroutine or in its handshake, which
// read through Conn: a frame it has read whole is one it processes, so the
// mirror follows its map frame by frame. The zero value is ready to use;
// it is safe for concurrent use.
type Watches struct {
	mu  sync.Mutex
	set map[watchKey]struct{}
}

// watchKind is a kind of watch registration, as go-zookeeper keys them.
type watchKind uint8

const (
	watchData watchKind = iota + 1
	watchExist
	watchChild
)

type watchKey struct {
	path string
	kind watchKind
}

// Len returns how many registrations (path and kind) go-zookeeper holds.
func (w *Watches) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.set)
}

func (w *Watches) add(k watchKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set == nil {
		w.set = make(map[watchKey]struct{})
	}
	w.set[k] = struct{}{}
}

func (w *Watches) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.set)
}

// Watch event types (zk.EventType) and the error code a reply carries when
// its node does not exist (zk.ErrNoNode).
const (
	eventNodeCreated         = 1
	eventNodeDeleted         = 2
	eventNodeDataChanged     = 3
	eventNodeChildrenChanged = 4
	errNoNode                = -101
)

// fired removes what go-zookeeper's notifyWatches removes for a watch
// event body after the xid: zxid, err, type, state, path.
func (w *Watches) fired(afterXid []byte) {
	if len(afterXid) < 20 {
		return
	}
	typ := int32(binary.BigEndian.Uint32(afterXid[12:16]))
	path, ok := readString(afterXid[20:])
	if !ok {
		return
	}
	var kinds []watchKind
	switch typ {
	case eventNodeCreated:
		kinds = []watchKind{watchExist}
	case eventNodeDataChanged:
		kinds = []watchKind{watchExist, watchData}
	case eventNodeChildrenChanged:
		kinds = []watchKind{watchChild}
	case eventNodeDeleted:
		kinds = []watchKind{watchExist, watchData, watchChild}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range kinds {
		delete(w.set, watchKey{path, k})
	}
}

// watchRequest is a request sent with the watch flag, awaiting its reply.
type watchRequest struct {
	op   int32
	path string
}

// replied adds the registration go-zookeeper makes for the reply to req,
// given the reply's error code.
func (w *Watches) replied(req watchRequest, errCode int32) {
	switch {
	case errCode == 0 && req.op == OpGetChildren2:
		w.add(watchKey{req.path, watchChild})
	case errCode == 0: // getData, exists
		w.add(watchKey{req.path, watchData})
	case errCode == errNoNode && req.op == OpExists:
		w.add(watchKey{req.path, watchExist})
	}
}

// WatchRequest returns the path of the request packet p if it is a
// getData, exists or getChildren2 with the watch flag set
// ([length][xid][opcode][path: int32 length, bytes][watch bool]).
func WatchRequest(p []byte) (op int32, path string, ok bool) {
	_, op, ok = Request(p)
	if !ok || (op != OpGetData && op != OpExists && op != OpGetChildren2) {
		return 0, "", false
	}
	s, ok := readString(p[12:])
	if !ok || 12+4+len(s) >= len(p) || p[12+4+len(s)] == 0 {
		return 0, "", false
	}
	return op, s, true
}

// readString decodes a string (int32 length, bytes) at the start of b.
func readString(b []byte) (string, bool) {
	if len(b) < 4 {
		return "", false
	}
	n := int(int32(binary.BigEndian.Uint32(b[0:4])))
	if n < 0 || 4+n > len(b) {
		return "", false
	}
	return string(b[4 : 4+n]), true
}
