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
// own-node watch must be set again, and the
// child slots that stand in for own-node watches; and the one routine that
// sets an own-node watch again (watchOwn). Its fields are under
// Session.mu.
type leaseRegistry struct {
	s      *Session
	gen    *generation
	byPath map[string]*lease // registered leases (prepared, early, live) by absolute znode path
	// Leases whose own-node watch must be set again by the janitor: one
	// consumed by a data change, or a read that failed. A reconnection
	// is no reason: go-zookeeper's set-watches re-registers every watch
	// it holds (own-node data watches and child watches included) on the
	// new connection, and nothing here does it again. If that request
	// fails on a connection that stays up, only a log line says so (see
	// zkLogger and docs/design.md#assumptions-about-go-zookeeper, 12).
	rewatch []*lease
	// child watches of pipelined listings that may stand in for a lease's
	// own-node watch, by absolute directory
	childSlots map[string]map[*childSlot]struct{}
}

func newLeaseRegistry() leaseRegistry {
	return leaseRegistry{byPath: make(map[string]*lease), childSlots: make(map[string]map[*childSlot]struct{})}
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

// childSlot is the child watch of an Acquire's pipelined listing (a
// getChildren with watch on the queue directory, sent right behind the
// create), which stands in for the lease's own-node watch when that listing
// grants: any later change of the directory's children, the deletion of our
// node included, fires it. It is registered before the listing is sent; a
// slot fired before the grant is not used; one that fires after the grant
// was decided on it makes the lease read its node with a data watch
// (leaseRegistry.watchOwn). A slot lives no longer than its early lease. See
// docs/design.md#the-child-watch-stand-in.
type childSlot struct {
	dir string // absolute

	// under Session.mu
	fired    bool
	granting bool   // the grant was decided on the listing that set the watch
	l        *lease // the early lease it covers
}

func (r *leaseRegistry) addSlotLocked(slot *childSlot) {
	m := r.childSlots[slot.dir]
	if m == nil {
		m = make(map[*childSlot]struct{})
		r.childSlots[slot.dir] = m
	}
	m[slot] = struct{}{}
}

func (r *leaseRegistry) dropSlotLocked(slot *childSlot) {
	if slot == nil {
		return
	}
	if m := r.childSlots[slot.dir]; m != nil {
		delete(m, slot)
		if len(m) == 0 {
			delete(r.childSlots, slot.dir)
		}
	}
}

// spendSlotsLocked spends every child slot on dir (a watch event there) and
// returns the leases granted on one, which must read their node now.
func (r *leaseRegistry) spendSlotsLocked(dir string) []*lease {
	m := r.childSlots[dir]
	if m == nil {
		return nil
	}
	delete(r.childSlots, dir)
	var arm []*lease
	for slot := range m {
		slot.fired = true
		if slot.granting {
			arm = append(arm, slot.l)
		}
	}
	return arm
}

// ---- the Session's lease operations (the engine calls these) ----

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
func (s *Session) newLease(ctx context.Context, n leaseNode, czxid int64) *lease {
	l := &lease{s: s, path: n.path, owner: n.owner, czxid: czxid, anchored: n.token != 0, keep: n.keep}
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
	l.outages = r.s.conns.outages
	r.byPath[l.path] = l
}

// prepareLease registers a lease on n before its node is read, so a
// deletion event that arrives between the read and the activation is not
// missed.
func (s *Session) prepareLease(ctx context.Context, n leaseNode) *lease {
	l := s.newLease(ctx, n, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases.registerLocked(l)
	return l
}

// registerEarly registers a lease on n from st, the Stat of its node that
// came with the create (its owner checked by the caller), with slot (if
// not nil) as the child watch standing in for its own-node watch. It is
// called before any watch request on the node is sent, so no event is
// missed.
func (s *Session) registerEarly(ctx context.Context, n leaseNode, st zk.Stat, slot *childSlot) *lease {
	l := s.newLease(ctx, n, st.Czxid)
	l.version, l.early = st.Version, true
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases.registerLocked(l)
	if slot != nil {
		l.child = slot
		slot.l = l
	}
	return l
}

// ownWatchRead records that the caller read the node of the early lease
// l with a data watch (the re-list skip): its own-node watch is set, and
// version is the node's data version from that read.
func (s *Session) ownWatchRead(l *lease, version int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.arming, l.version = true, version
}

// activateLease makes a registered lease live if nothing ended ownership
// since its registration; otherwise it drops it and returns the reason.
// st is the node's Stat read for the grant (nil for an early lease, whose
// Stat came with the create).
func (s *Session) activateLease(l *lease, ep *epoch, st *zk.Stat) error {
	s.mu.Lock()
	defer s.unlock()
	gen := l.gen
	var cause error
	switch {
	case !l.Live():
		cause = l.dropped
	case s.closed:
		cause = recipe.ErrSessionClosed
	case ep.cause != nil:
		cause = ep.cause
	case s.conns.epoch != ep || s.leases.gen != gen || gen.revoked || !s.conns.state.IsConnected():
		cause = recipe.ErrSuspended
	}
	if cause != nil {
		s.leases.forgetLocked(l)
		l.endLocked(cause)
		return cause
	}
	l.grantLocked(st)
	return nil
}

// dropLease forgets a prepared lease that was never activated.
func (s *Session) dropLease(l *lease) {
	s.mu.Lock()
	defer s.unlock()
	s.leases.forgetLocked(l)
	l.endLocked(recipe.ErrReleased)
}

func (s *Session) addChildSlot(dir string) *childSlot {
	slot := &childSlot{dir: dir}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases.addSlotLocked(slot)
	return slot
}

// addChildSlotFor registers a child slot on dir for the early lease l,
// replacing l's previous one, and returns it.
func (s *Session) addChildSlotFor(dir string, l *lease) *childSlot {
	slot := &childSlot{dir: dir, l: l}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases.dropSlotLocked(l.child)
	l.child = slot
	s.leases.addSlotLocked(slot)
	return slot
}

func (s *Session) dropChildSlot(slot *childSlot) {
	if slot == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases.dropSlotLocked(slot)
}

// useChildSlot claims slot for a grant decided on the listing that set its
// watch: from then on a firing makes the lease read its node. A slot found
// fired already is used all the same, and the read starts now: the watch
// was set by that listing, so whatever fired it happened after the state
// the grant is decided on (or, fired by an earlier listing's watch on the
// same directory, before it and seen by it), exactly as a firing right
// after the grant; only the scheduling of two goroutines told them apart.
// See docs/design.md#the-child-watch-stand-in.
func (s *Session) useChildSlot(slot *childSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot.granting = true
	if slot.fired {
		s.leases.armLocked(slot.l)
	}
}

// ---- ending leases (under Session.mu) and own-node watches ----

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
	s := r.s
	r.forgetLocked(l)
	delete(l.gen.leases, l)
	l.endLocked(cause)
	if queueDelete && !s.closed {
		s.cleaner.queueLocked(cleanupItem{path: l.path, czxid: l.czxid, owner: l.owner})
	}
}

// onEventLocked handles a watch event on a live lease's own node: a
// deletion ends it; a data change (someone wrote to it) consumed its watch,
// which the janitor sets again. A lease not yet active reads its node after
// this anyway, unless its Stat came with the create (early).
func (r *leaseRegistry) onEventLocked(l *lease, ev zk.Event) {
	s := r.s
	switch ev.Type {
	case zk.EventNodeDeleted:
		r.revokeLocked(l, recipe.ErrNodeDeleted, false)
	case zk.EventNodeDataChanged:
		if l.active || l.early {
			r.rewatch = append(r.rewatch, l)
			kick(s.cleaner.kick)
		}
	}
}

// fireSlotsLocked spends every child slot on dir: a lease granted on
// one reads its node now.
func (r *leaseRegistry) fireSlotsLocked(dir string) {
	for _, l := range r.spendSlotsLocked(dir) {
		r.armLocked(l)
	}
}

// armLocked starts the read that sets l's own-node watch (watchOwn), on a
// worker (the event callback must not block), once per lease.
func (r *leaseRegistry) armLocked(l *lease) {
	s := r.s
	if l == nil || l.arming || !l.Live() || s.closed {
		return
	}
	l.arming = true
	s.pool.run(func() {
		if !r.watchOwn(l) {
			kick(s.cleaner.kick)
		}
	})
}

// rewatchAll runs watchOwn for every lease queued for it. It reports
// false if some must be retried.
func (r *leaseRegistry) rewatchAll() bool {
	s := r.s
	s.mu.Lock()
	todo := r.rewatch
	r.rewatch = nil
	s.mu.Unlock()
	ok := true
	for _, l := range todo {
		ok = r.watchOwn(l) && ok
	}
	return ok
}

// watchOwn sets a data watch on l's own node and checks it is still the
// node granted: NoNode, or another czxid or owner, ends the lease
// (recipe.ErrNodeDeleted). A connection error queues l for the janitor (which
// retries on reconnection) and returns false.
func (r *leaseRegistry) watchOwn(l *lease) bool {
	s := r.s
	if !l.Live() {
		return true
	}
	_, st, _, err := s.conn.GetW(l.path)
	s.mu.Lock()
	defer s.unlock()
	switch {
	case !l.Live():
	case errors.Is(err, zk.ErrNoNode):
		r.revokeLocked(l, recipe.ErrNodeDeleted, false)
	case err != nil:
		if !s.closed {
			r.rewatch = append(r.rewatch, l)
		}
		return false
	case !l.isNode(st):
		r.revokeLocked(l, recipe.ErrNodeDeleted, false)
	default:
		l.version = st.Version
	}
	return true
}
