package zkwire

import (
	"sync"

	"github.com/go-zookeeper/zk"
)

// Creates is the registry of creates to send as create2, by the exact path
// sent (a sequential node's prefix). The zero value is ready to use; it is
// safe for concurrent use.
type Creates struct {
	mu     sync.Mutex
	byPath map[string]*Create
}

// Create is one registered create.
type Create struct {
	onWritten func()

	// under Creates.mu
	written bool
	closed  bool    // unregistered: onWritten is not called any more
	replied bool    // a create2 reply with a Stat was read
	path    string  // the path in that reply
	stat    zk.Stat // the Stat in that reply
}

// Register asks that the create request sent with exactly path be sent as
// create2 and its reply's Stat recorded. onWritten, if set, is called once,
// on go-zookeeper's send goroutine, as the create is being written: requests
// made after that are sent after it on this connection. It must not block.
func (r *Creates) Register(path string, onWritten func()) *Create {
	cr := &Create{onWritten: onWritten}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byPath == nil {
		r.byPath = make(map[string]*Create)
	}
	r.byPath[path] = cr
	return cr
}

// Unregister ends cr's registration and returns what was seen: whether the
// create was written, and whether a create2 reply came with the node's
// path and Stat. A create written once more after this (a late write of a
// request the caller stopped waiting for) does not call onWritten.
func (r *Creates) Unregister(path string, cr *Create) (written, replied bool, replyPath string, st zk.Stat) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byPath[path] == cr {
		delete(r.byPath, path)
	}
	cr.closed = true
	return cr.written, cr.replied, cr.path, cr.stat
}

func (r *Creates) lookup(path []byte) *Create {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPath[string(path)]
}

func (r *Creates) written(cr *Create) {
	r.mu.Lock()
	first := !cr.written && !cr.closed
	cr.written = cr.written || !cr.closed
	r.mu.Unlock()
	if first && cr.onWritten != nil {
		cr.onWritten()
	}
}

// replied records a create2 reply body after the xid: zxid, err, then (if
// err is 0) the path and the Stat.
func (r *Creates) replied(cr *Create, afterXid []byte) {
	path, st, ok := parseCreate2(afterXid)
	if !ok {
		return
	}
	r.mu.Lock()
	cr.replied, cr.path, cr.stat = true, path, st
	r.mu.Unlock()
}
