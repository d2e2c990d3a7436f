package zookeeper

import (
	"context"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is a grant made by a Queue: the znode at path, created by session
// owner with czxid as its fencing token.
type lease struct {
	s   *Session
	gen *generation
	// connState.outages when the lease was registered (under Session.mu):
	// Release deletes by version without reading the node only if the
	// connection has not been down since.
	outages uint64
	path    string // absolute
	czxid   int64  // from the create2 reply (early), or set under Session.mu by activateLease
	token   int64  // the fencing token when it is not czxid (anchored node)
	owner   int64
	active  bool // granted (under Session.mu)
	// Set at registration for a lease whose node's Stat came with the
	// create (Queue.join): it can be granted without a read of its node.
	// Its own-node watch is then the child watch of the listing that
	// granted it, or the data watch of the re-list skip's read (in the
	// foreground).
	early bool
	// Its own-node data watch is set, or its read is under way, so none is
	// started again (under Session.mu): set after the re-list skip's read
	// completed (ownWatchRead), or when the background read is started
	// because the granting child slot fired (fireSlotsLocked).
	arming bool
	child  *childSlot // the child watch standing in for its own-node watch, if any
	// The node's data version last read, under Session.mu (Release
	// deletes with it).
	version int32
	keep    bool     // the node outlives a suspension (a Ticket of Join)
	kinds   []string // the node kinds of its queue
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu       sync.Mutex
	released bool // the delete has completed
}

var _ recipe.Lease = (*lease)(nil)

// Token returns the czxid of the znode that gives the lease its queue
// position: its own, or for an anchored node (a read-write lock's
// downgrade) its anchor's.
func (l *lease) Token() fence.Token {
	if l.token != 0 {
		return fence.Token(l.token)
	}
	return fence.Token(l.czxid)
}

// Context is done when ownership ends; see recipe.Lease.
func (l *lease) Context() context.Context { return l.ctx }

// Path returns the lease znode's path relative to the chroot.
func (l *lease) Path() string { return l.path[len(l.s.chroot):] }

// isNode reports whether st is the Stat of l's node: same czxid and owner
// (not a node of the same name created since).
func (l *lease) isNode(st *zk.Stat) bool {
	return st.Czxid == l.czxid && st.EphemeralOwner == l.owner
}

// Release gives the lease up: it ends the lease context (cause
// recipe.ErrReleased) first, then deletes the znode, ignoring ctx's cancellation
// for the delete itself and retrying on connection loss until the cleanup
// timeout; ctx's end stops the retries 250 ms (abandonBudget) later, so a
// ctx already done (a deferred Release at shutdown) still gets a delete
// that completes in that time, and nil. A delete that could not complete
// is handed to the Session's cleaner, so the lock is freed on reconnection
// even if Release is never called again. The ZooKeeper operations are described in
// docs/design.md#acquisition.
//
// Errors: recipe.ErrLeaseLost (wrapping the cause) if ownership ended before
// Release; a connection error if the delete could not be confirmed (call
// Release again: it returns nil once the node is gone).
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.s.mu.Lock()
	if l.ctx.Err() == nil {
		l.s.leases.revokeLocked(l, recipe.ErrReleased, false)
	}
	l.s.mu.Unlock()
	if cause := context.Cause(l.ctx); cause != recipe.ErrReleased {
		return errorf("%w (%w)", recipe.ErrLeaseLost, cause)
	}
	// Delete by version without reading the node only while the connection
	// has not been down since the lease was registered (across an outage a
	// watch event can be lost): docs/design.md#cleanup-and-delete-by-version.
	l.s.mu.Lock()
	unbroken := l.s.conns.state.IsConnected() && l.s.conns.outages == l.outages
	it := cleanupItem{path: l.path, czxid: l.czxid, owner: l.owner, version: l.version, byVersion: unbroken}
	l.s.mu.Unlock()
	err := l.s.deleteOwned(ctx, it, true)
	if err != nil {
		return &recipe.OpError{Op: "delete", Path: l.Path(), Err: zkError{err}}
	}
	l.released = true
	return nil
}
