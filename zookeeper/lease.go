package zookeeper

import (
	"context"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is a grant made by a Queue: the znode at path, created by session
// owner, whose czxid (an anchored node: its anchor's) is the fencing
// token. Its core (token, context, Release) is grant.Core's, made when the
// lease is registered, before the grant: a lease that ends before it is
// granted held nothing, so it ends with recipe.ErrReleased (no loss is
// reported) and keeps the reason in dropped. The fields below the core are
// under Session.mu unless noted.
type lease struct {
	grant.Core
	reg *leaseRegistry // set at creation
	gen *generation
	// connState.outages when the lease was registered: Release deletes by
	// version without reading the node only if the connection has not been
	// down since.
	outages  uint64
	path     string // absolute; set at creation
	czxid    int64  // from the create2 reply (early), or set by activateLease
	owner    int64  // set at creation
	anchored bool   // the token is its anchor's (set at creation)
	active   bool   // granted
	dropped  error  // why it ended before it was granted
	// Set at registration for a lease whose node's Stat came with the
	// create (Queue.join): it can be granted without a read of its node.
	// Its own-node watch is then the child watch of the listing that
	// granted it, or the data watch of the re-list skip's read.
	early bool
	// Its own-node data watch is set, or its read is under way, so none is
	// started again: set after the re-list skip's read completed
	// (ownWatchRead), or when the background read is started because the
	// granting child slot fired (armLocked).
	arming  bool
	child   *childSlot // the child watch standing in for its own-node watch, if any
	version int32      // the node's data version last read (Release deletes with it)
	keep    bool       // the node outlives a suspension (a Ticket of Join); set at creation
	marker  *marker    // the lock-delay marker it wrote (lockdelay.go); set before the grant is handed out
}

var _ recipe.Lease = (*lease)(nil)

// Path returns the lease znode's path relative to the chroot.
func (l *lease) Path() string { return l.path[len(l.reg.chroot):] }

// isNode reports whether st is the Stat of l's node: same czxid and owner
// (not a node of the same name created since).
func (l *lease) isNode(st *zk.Stat) bool {
	return st.Czxid == l.czxid && st.EphemeralOwner == l.owner
}

// endLocked ends l with cause unless it has ended (the first cause wins):
// a granted lease through its core, which reports the loss; one not
// granted yet with recipe.ErrReleased, keeping cause for activateLease.
func (l *lease) endLocked(cause error) {
	if !l.active {
		if l.Live() {
			l.dropped = cause
		}
		cause = recipe.ErrReleased
	}
	l.End(cause)
}

// grantLocked makes l live; st, if not nil, is its node's Stat read for
// the grant (a lease registered before its read learns its czxid here).
func (l *lease) grantLocked(st *zk.Stat) {
	if st != nil {
		l.czxid, l.version = st.Czxid, st.Version
		if !l.anchored {
			l.SetToken(fence.Token(st.Czxid))
		}
	}
	l.gen.leases[l] = struct{}{}
	l.active = true
}

// Release gives the lease up: it ends the lease context (cause
// recipe.ErrReleased), then deletes the znode, ignoring ctx's cancellation
// for the delete and retrying connection losses until the cleanup timeout,
// and until 250 ms (abandonBudget) after ctx ends, so a ctx already done (a
// deferred Release at shutdown) still gets a delete that completes in that
// time; one that cannot complete goes to the Session's cleaner, which frees
// the lock on reconnection (operations: docs/design.md#acquisition).
// Errors: recipe.ErrLeaseLost wrapping the cause if ownership ended before;
// a connection error if the delete was not confirmed (Release again returns
// nil once the node is gone).
func (l *lease) Release(ctx context.Context) error {
	return l.Core.Release(ctx, l.end, l.remove)
}

// end is Release's first step: the lease ends, if it is live, under
// Session.mu, as every end of a lease.
func (l *lease) end() {
	r := l.reg
	r.mu.Lock()
	defer r.mu.unlock()
	if l.Live() {
		r.revokeLocked(l, recipe.ErrReleased, false)
	}
}

// remove is Release's second step: the delete of the node, by version
// without reading it only while the connection has not been down since
// the lease was registered (across an outage a watch event can be lost):
// docs/zookeeper-client.md#cleanup-and-delete-by-version. A lease that wrote the
// lock-delay marker deletes it with its node first (removeWithMarker).
func (l *lease) remove(ctx context.Context) (done bool, _ error) {
	if m := l.marker; m != nil && l.removeWithMarker(ctx, m) {
		return true, nil
	}
	r := l.reg
	r.mu.Lock()
	unbroken := r.conns.state.IsConnected() && r.conns.outages == l.outages
	it := cleanupItem{path: l.path, czxid: l.czxid, owner: l.owner, version: l.version, byVersion: unbroken}
	r.mu.Unlock()
	if err := r.cleaner.delete(ctx, it, true); err != nil {
		return false, &recipe.OpError{Op: "delete", Path: l.Path(), Err: zkError{err}}
	}
	return true, nil
}
