package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Child slots (docs/zookeeper-client.md#the-child-watch-stand-in) and own-node
// watches: how the lease registry keeps a watch on every live lease's node.

// childSlot is the child watch of an Acquire's pipelined listing (a
// getChildren with watch on the queue directory, sent right behind the
// create), which stands in for the lease's own-node watch when that listing
// grants: any later change of the directory's children, the deletion of our
// node included, fires it. It is registered before the listing is sent; a
// slot fired before the grant is not used; one that fires after the grant
// was decided on it makes the lease read its node with a data watch
// (leaseRegistry.watchOwn). A slot lives no longer than its early lease. See
// docs/zookeeper-client.md#the-child-watch-stand-in.
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

// addSlot registers a child slot on dir, for the early lease its listing
// may grant (set by registerEarly).
func (r *leaseRegistry) addSlot(dir string) *childSlot {
	slot := &childSlot{dir: dir}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addSlotLocked(slot)
	return slot
}

// addSlotFor registers a child slot on dir for the early lease l,
// replacing l's previous one, and returns it.
func (r *leaseRegistry) addSlotFor(dir string, l *lease) *childSlot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addSlotForLocked(dir, l)
}

// addSlotForLocked is addSlotFor under mu (the prefetch registers the
// re-list's slot from the event callback).
func (r *leaseRegistry) addSlotForLocked(dir string, l *lease) *childSlot {
	slot := &childSlot{dir: dir, l: l}
	r.dropSlotLocked(l.child)
	l.child = slot
	r.addSlotLocked(slot)
	return slot
}

// dropSlot forgets slot (nil: nothing).
func (r *leaseRegistry) dropSlot(slot *childSlot) {
	if slot == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropSlotLocked(slot)
}

// useSlot claims slot for a grant decided on the listing that set its
// watch: from then on a firing makes the lease read its node. A slot found
// fired already is used all the same, and the read starts now: the watch
// was set by that listing, so whatever fired it happened after the state
// the grant is decided on (or, fired by an earlier listing's watch on the
// same directory, before it and seen by it), exactly as a firing right
// after the grant; only the scheduling of two goroutines told them apart.
// See docs/zookeeper-client.md#the-child-watch-stand-in.
func (r *leaseRegistry) useSlot(slot *childSlot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot.granting = true
	if slot.fired {
		r.armLocked(slot.l)
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
	if l == nil || l.arming || !l.Live() || r.mu.closed {
		return
	}
	l.arming = true
	r.pool.run(func() {
		if !r.watchOwn(l) {
			kick(r.cleaner.kick)
		}
	})
}

// rewatchAll runs watchOwn for every lease queued for it. It reports
// false if some must be retried.
func (r *leaseRegistry) rewatchAll() bool {
	r.mu.Lock()
	todo := r.rewatch
	r.rewatch = nil
	r.mu.Unlock()
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
	if !l.Live() {
		return true
	}
	st, err := r.s.stat(context.Background(), l.path, true)
	r.mu.Lock()
	defer r.mu.unlock()
	switch {
	case !l.Live():
	case errors.Is(err, zk.ErrNoNode):
		r.revokeLocked(l, recipe.ErrNodeDeleted, false)
	case err != nil:
		if !r.mu.closed {
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
