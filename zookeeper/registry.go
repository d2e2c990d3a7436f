package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// leaseRegistry is the Session's record of its leases: the generation they
// belong to, every registered one by path (prepared, early and live, so
// that a watch event on a lease's own node reaches it), those whose
// own-node watch must be set again, and the child slots that stand in for
// own-node watches (slots.go). It makes, arms, activates and ends every
// lease: the engine describes its node (a leaseNode) and calls it. Its
// fields are under mu.
type leaseRegistry struct {
	mu      *sessionLock
	conns   *connState // the epoch, generation checks and outages a lease is activated under
	cleaner *cleaner   // a revoked lease's node, and own-node watches to set again
	pool    *workers   // the own-node reads started from the event callback
	s       *Session   // its calls (owncall.go)
	chroot  string

	gen    *generation
	byPath map[string]*lease // registered leases (prepared, early, live) by absolute znode path
	// Leases whose own-node watch must be set again by the janitor: one
	// consumed by a data change, or a read that failed. A reconnection
	// is no reason: the hub's set-watches re-registers every watch the
	// calls set (own-node data watches and child watches included) on the
	// new connection (hub.connected), and nothing here does it again. If
	// that request fails on a connection that stays up, only a log line
	// says so (docs/zookeeper-client.md#assumptions-about-go-zookeeper, 12).
	rewatch []*lease
	// child watches of pipelined listings that may stand in for a lease's
	// own-node watch, by absolute directory
	childSlots map[string]map[*childSlot]struct{}
}

// generation is a period of uninterrupted ownership: it ends (revoked) at
// SUSPENDED under the policy, at LOST, and at Close. Leases belong to the
// generation in which they were granted.
type generation struct {
	revoked bool
	leases  map[*lease]struct{}
}

func (r *leaseRegistry) newGenerationLocked() {
	r.gen = &generation{leases: make(map[*lease]struct{})}
}

// forgetLocked removes l from byPath (if it is there) and drops its child slot.
func (r *leaseRegistry) forgetLocked(l *lease) {
	if r.byPath[l.path] == l {
		delete(r.byPath, l.path)
	}
	r.dropSlotLocked(l.child)
}

// ---- the lease operations the engine calls ----

// leaseNode is the queue node a lease is granted on.
type leaseNode struct {
	path  string          // absolute
	owner int64           // the session that created it
	token int64           // for an anchored node, its anchor's token; 0 otherwise
	keep  bool            // it outlives a suspension (a Ticket of Join)
	rep   *grant.Reporter // where its loss is reported: its queue's, for its kind
}

// newLease returns a lease on n, not registered yet, whose context keeps
// ctx's values but ends only when the lease does; czxid is its node's when
// known (early), else 0.
func (r *leaseRegistry) newLease(ctx context.Context, n leaseNode, czxid int64) *lease {
	l := &lease{reg: r, path: n.path, owner: n.owner, czxid: czxid, anchored: n.token != 0, keep: n.keep}
	token := n.token
	if token == 0 {
		token = czxid
	}
	l.Init(ctx, fence.Token(token), n.rep)
	return l
}

// registerLocked makes l reachable by the events on its node, in the
// current generation.
func (r *leaseRegistry) registerLocked(l *lease) {
	l.gen = r.gen
	l.outages = r.conns.outages
	r.byPath[l.path] = l
}

// prepare registers a lease on n before its node is read, so a
// deletion event that arrives between the read and the activation is not
// missed.
func (r *leaseRegistry) prepare(ctx context.Context, n leaseNode) *lease {
	l := r.newLease(ctx, n, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registerLocked(l)
	return l
}

// registerEarly registers a lease on n from st, the Stat of its node that
// came with the create (its owner checked by the caller), with slot (if
// not nil) as the child watch standing in for its own-node watch. It is
// called before any watch request on the node is sent, so no event is
// missed.
func (r *leaseRegistry) registerEarly(ctx context.Context, n leaseNode, st zk.Stat, slot *childSlot) *lease {
	l := r.newLease(ctx, n, st.Czxid)
	l.version, l.early = st.Version, true
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registerLocked(l)
	if slot != nil {
		l.child = slot
		slot.l = l
	}
	return l
}

// ownWatchRead records that the caller read the node of the early lease
// l with a data watch (the re-list skip): its own-node watch is set, and
// version is the node's data version from that read.
func (r *leaseRegistry) ownWatchRead(l *lease, version int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.arming, l.version = true, version
}

// activate makes a registered lease live if nothing ended ownership
// since its registration; otherwise it drops it and returns the reason.
// st is the node's Stat read for the grant (nil for an early lease, whose
// Stat came with the create).
func (r *leaseRegistry) activate(l *lease, ep *epoch, st *zk.Stat) error {
	r.mu.Lock()
	defer r.mu.unlock()
	gen := l.gen
	var cause error
	switch {
	case !l.Live():
		cause = l.dropped
	case r.mu.closed:
		cause = recipe.ErrSessionClosed
	case ep.cause != nil:
		cause = ep.cause
	case r.conns.epoch != ep || r.gen != gen || gen.revoked || !r.conns.state.IsConnected():
		cause = recipe.ErrSuspended
	}
	if cause != nil {
		r.forgetLocked(l)
		l.endLocked(cause)
		return cause
	}
	l.grantLocked(st)
	return nil
}

// drop forgets a prepared lease that was never activated.
func (r *leaseRegistry) drop(l *lease) {
	r.mu.Lock()
	defer r.mu.unlock()
	r.forgetLocked(l)
	l.endLocked(recipe.ErrReleased)
}

// ---- ending leases (under mu) ----

// revokeGenLocked ends the current generation and every lease in it.
func (r *leaseRegistry) revokeGenLocked(cause error) {
	gen := r.gen
	if gen == nil || gen.revoked {
		return
	}
	gen.revoked = true
	suspended := errors.Is(cause, recipe.ErrSuspended)
	for l := range gen.leases {
		// A lease's znode may still exist: delete it on reconnection (so a
		// lock nobody holds is freed), unless it belongs to a Ticket that
		// keeps its place across a suspension (leader latch).
		r.revokeLocked(l, cause, !(l.keep && suspended))
	}
}

// revokeLocked ends one lease. With queueDelete (its znode may still
// exist: suspension, presumed expiry) the node is queued for the cleaner,
// which deletes it on reconnection of the same ZooKeeper session.
func (r *leaseRegistry) revokeLocked(l *lease, cause error, queueDelete bool) {
	r.forgetLocked(l)
	delete(l.gen.leases, l)
	l.endLocked(cause)
	if queueDelete && !r.mu.closed {
		r.cleaner.queueLocked(cleanupItem{path: l.path, czxid: l.czxid, owner: l.owner})
	}
}

// onEventLocked handles a watch event on a live lease's own node: a
// deletion ends it; a data change (someone wrote to it) consumed its watch,
// which the janitor sets again. A lease not yet active reads its node after
// this anyway, unless its Stat came with the create (early).
func (r *leaseRegistry) onEventLocked(l *lease, ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDeleted:
		r.revokeLocked(l, recipe.ErrNodeDeleted, false)
	case zk.EventNodeDataChanged:
		if l.active || l.early {
			r.rewatch = append(r.rewatch, l)
			kick(r.cleaner.kick)
		}
	}
}
