package zookeeper

import (
	"log/slog"
	"sync/atomic"
	"time"

	"errors"

	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// cleaner is the Session's queue of deletes of its own znodes that could
// not be completed (connection loss during a release or a cancelled
// acquisition), and the janitor goroutine that retries them on every
// reconnection of the session that owns them, and sets again the own-node
// watches queued for it (leaseRegistry.rewatchAll: consumed by a data
// change, or a read that failed; a reconnection's re-registration is
// go-zookeeper's). items is under mu. See
// docs/zookeeper-client.md#cleanup-and-delete-by-version.
type cleaner struct {
	mu             *sessionLock
	conns          *connState     // whose session owns an item, whether it is connected
	leases         *leaseRegistry // own-node watches to set again
	req            *requests
	wire           *wireState // the session timeout, the default cleanup timeout
	s              *Session   // its calls (owncall.go)
	log            *slog.Logger
	cleanupTimeout time.Duration // WithCleanupTimeout (0: the session timeout)
	quit           <-chan struct{}
	// silent is the last reply's mark (wireState.lastReply) when a probe
	// of whileUp went unanswered: while no reply came since, the server is
	// taken for silent at once.
	silent atomic.Int64

	items []cleanupItem
	kick  chan struct{} // wakes the janitor
}

// keepOnlyLocked finishes and drops every item not owned by the session owner:
// the ephemerals of other sessions died with them.
func (cl *cleaner) keepOnlyLocked(owner int64) {
	kept := cl.items[:0]
	for _, it := range cl.items {
		if it.owner == owner {
			kept = append(kept, it)
		} else {
			it.finish()
		}
	}
	cl.items = kept
}

// finishOwnerLocked finishes the items of owner's session (lost: whoever waits
// for them stops waiting) but keeps them, in case the session comes back.
func (cl *cleaner) finishOwnerLocked(owner int64) {
	for i := range cl.items {
		if cl.items[i].owner == owner {
			cl.items[i].finish()
			cl.items[i].done = nil
		}
	}
}

// finishAllLocked finishes every item and empties the queue (Close: a closed
// session's ephemerals go with it).
func (cl *cleaner) finishAllLocked() {
	for _, it := range cl.items {
		it.finish()
	}
	cl.items = nil
}

// cleanupItem names a znode of ours that must go: either by path (czxid 0 =
// unknown) or, when a create's reply was lost, by the GUID in its name under
// dir. owner is the ZooKeeper session that created (or may have created) it;
// a node with another owner is never touched.
type cleanupItem struct {
	path  string // absolute
	czxid int64
	owner int64
	dir   string // absolute; with guid, for nodes whose name we never learned
	guid  string
	// byVersion: delete path with this data version without reading the
	// node first (a lease's own node, Release's first attempt: deleteQuick).
	byVersion bool
	version   int32
	// done, if set, is called once the item is finished: deleted, found
	// gone or not ours, dropped with its session, or failed for good. A
	// Queue counts its items this way so that Drain waits for them.
	done func()
	// sends bounds the requests of its deletes (size 0: from the path,
	// see sized) and counts their connection losses (see packet.go).
	sends lostSends
}

// sized returns c with sends.size set: what a request carrying its path
// may weigh. (An item by GUID is given its queue's.)
func (c cleanupItem) sized() cleanupItem {
	if c.sends.size == 0 {
		c.sends.size = max(len(c.path), len(c.dir)+1+len(protectedPrefix)+guidLen+seqLen) + pathSlack
	}
	return c
}

func (c cleanupItem) finish() {
	if c.done != nil {
		c.done()
	}
}

// String names the node for a log line, its path shortened (shortpath.Of).
func (c cleanupItem) String() string {
	if c.path != "" {
		return shortpath.Of(c.path)
	}
	return shortpath.Of(c.dir) + "/*" + c.guid + "*"
}

// queueLocked hands it to the cleaner. An item of a lost session is
// finished at once (its node went with the session, as far as anyone
// waiting for it is concerned) but kept, in case the session comes back.
func (cl *cleaner) queueLocked(it cleanupItem) {
	it = it.sized()
	if cl.conns.ownerLostLocked(it.owner) {
		it.finish()
		it.done = nil
	}
	cl.items = append(cl.items, it)
	kick(cl.kick)
}

// run is the janitor: whenever it is kicked, and every second while
// something is left, it sets own-node watches again and retries the
// deferred deletes while the connection is up.
func (cl *cleaner) run() {
	var retry <-chan time.Time
	for {
		select {
		case <-cl.quit:
			return
		case <-cl.kick:
		case <-retry:
		}
		retry = nil
		ok := cl.leases.rewatchAll()
		cl.mu.Lock()
		items := cl.items
		cl.items = nil
		connected := cl.conns.state.IsConnected()
		cl.mu.Unlock()
		failed, closing := cl.round(items, connected)
		if closing {
			return
		}
		if len(failed) > 0 {
			cl.requeue(failed)
			ok = false
		}
		if !ok {
			retry = time.After(time.Second)
		}
	}
}

// round tries the deletes of items in order while the connection is
// up, and returns those to try again. closing reports that the Session is
// closing (every item left is finished).
func (cl *cleaner) round(items []cleanupItem, connected bool) (failed []cleanupItem, closing bool) {
	for i, it := range items {
		if !connected {
			return append(failed, items[i:]...), false
		}
		err := cl.deleteOnce(cl.req.life.Context(), it)
		switch {
		case err == nil:
			it.finish()
			cl.log.Debug("session cleaner: deleted", "node", it.String())
		case isClosing(err), errors.Is(err, recipe.ErrSessionClosed):
			for _, it := range items[i:] {
				it.finish()
			}
			return nil, true
		case !isConnErr(err):
			cl.log.Error("session cleaner: delete failed", "node", it.String(), "err", err)
			it.finish()
		default:
			connected = false
			if gerr := it.sends.note(err); gerr != nil {
				cl.giveUp(it, gerr)
				it.finish()
				continue
			}
			failed = append(failed, it)
		}
	}
	return failed, false
}

// requeue puts failed back at the front of the queue (an item of a
// lost session finished, as queueLocked does), or finishes them
// when the Session is closed.
func (cl *cleaner) requeue(failed []cleanupItem) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.mu.closed {
		for _, it := range failed {
			it.finish()
		}
		return
	}
	for i := range failed {
		if cl.conns.ownerLostLocked(failed[i].owner) {
			failed[i].finish()
			failed[i].done = nil
		}
	}
	cl.items = append(failed, cl.items...)
}

// pending returns how many deletes wait for a reconnection (normally 0):
// zkside.Session.PendingCleanup.
func (cl *cleaner) pending() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.items)
}
