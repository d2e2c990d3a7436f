package zookeeper

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// StateChange is one connection-state transition.
type StateChange struct {
	State     recipe.ConnState
	SessionID int64     // the ZooKeeper session ID the transition concerns
	At        time.Time // when the Session observed it
	Cause     error     // for SUSPENDED and LOST: why
}

// connState is the Session's connection state machine: the state, the
// ZooKeeper session it concerns (epoch), who hears of transitions, and the
// ownership deadlines (deadline.go). Its transitions end the generations
// of the lease registry and the cleanup items of lost sessions. Its fields
// are under mu, but for the deadlines' pointer, which replies read without
// it. See docs/zookeeper-client.md#connection-states-and-the-ownership-deadline.
type connState struct {
	mu      *sessionLock
	leases  *leaseRegistry
	cleaner *cleaner
	wire    *wireState
	policy  SuspendPolicy
	metrics recipe.Metrics
	quit    <-chan struct{} // the Session's: closed once it is closed

	state   recipe.ConnState
	started bool // first session seen
	epoch   *epoch
	// outages counts transitions to a not-connected state (SUSPENDED,
	// LOST): a lease's unchecked release needs none since its registration.
	outages   uint64
	changed   notify.Broadcast              // wakes awaitConnected at every transition
	listeners notify.Listeners[StateChange] // Listen's feeds
	// The ownership deadlines of the current session; nil before the first
	// session, after its loss, and after Close.
	deadlines atomic.Pointer[ownership]
}

// epoch is one ZooKeeper session as seen by this Session.
type epoch struct {
	id     int64
	cause  error           // set (under Session.mu) before ctx is cancelled
	ctx    context.Context // done, with cause, when LOST
	cancel context.CancelCauseFunc
}

func newEpoch(id int64) *epoch {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &epoch{id: id, ctx: ctx, cancel: cancel}
}

// idLocked returns the current ZooKeeper session ID (0 before the first).
func (c *connState) idLocked() int64 {
	if c.epoch == nil {
		return 0
	}
	return c.epoch.id
}

// ownerLostLocked reports whether owner's session is known lost: a later
// session replaced it, or it is current but expired or presumed expired.
func (c *connState) ownerLostLocked(owner int64) bool {
	return c.epoch == nil || c.epoch.id != owner || c.epoch.cause != nil
}

// setLocked makes st the state, telling Metrics, the listeners and the log.
func (c *connState) setLocked(st recipe.ConnState, cause error) {
	if c.state == st {
		return
	}
	if c.metrics != nil {
		c.metrics.SessionState(c.state, st, cause)
	}
	c.state = st
	if !st.IsConnected() {
		c.outages++
	}
	c.changed.Notify()
	ch := StateChange{State: st, SessionID: c.idLocked(), At: time.Now(), Cause: cause}
	c.listeners.Push(ch)
	c.mu.transitions = append(c.mu.transitions, ch)
}

// ---- transitions (under Session.mu; go-zookeeper's event callback runs
// them, so they never block) ----

// onSessionLocked handles a session established with id: the first, the
// same one again, or a new one that replaces a lost (or presumed lost) one.
func (c *connState) onSessionLocked(id int64) {
	switch {
	case !c.started:
		c.started = true
		c.epoch = newEpoch(id)
		c.leases.newGenerationLocked()
		c.setLocked(recipe.StateConnected, nil)
	case id == c.epoch.id && c.epoch.cause == nil:
		if c.state == recipe.StateSuspended {
			if c.leases.gen.revoked {
				c.leases.newGenerationLocked()
			}
			c.setLocked(recipe.StateReconnected, nil)
		}
	default:
		if c.epoch.cause == nil {
			c.loseEpochLocked(fmt.Errorf("%w: server gave a new session 0x%x", recipe.ErrSessionLost, id))
		}
		c.epoch = newEpoch(id)
		c.leases.newGenerationLocked()
		c.cleaner.keepOnlyLocked(id) // other sessions' ephemerals died with them
		c.setLocked(recipe.StateReconnected, nil)
	}
	c.armLocked()
	kick(c.cleaner.kick)
}

// suspendLocked reports SUSPENDED (if connected) and, under the default
// policy, ends the current generation.
func (c *connState) suspendLocked(cause error) {
	if c.state.IsConnected() {
		c.setLocked(recipe.StateSuspended, cause)
	}
	if !c.policy.tolerate {
		c.leases.revokeGenLocked(cause)
	}
}

// loseEpochLocked ends the current ZooKeeper session's ownership for good.
// Deletes waiting for it are moot (its nodes went with it): whoever waits
// for them (Queue.Drain) stops waiting; the items stay, in case a
// presumed-lost session comes back.
func (c *connState) loseEpochLocked(cause error) {
	ep := c.epoch
	if ep == nil || ep.cause != nil {
		return
	}
	ep.cause = cause
	ep.cancel(cause)
	c.disarmLocked()
	c.leases.revokeGenLocked(cause)
	c.cleaner.finishOwnerLocked(ep.id)
	c.setLocked(recipe.StateLost, cause)
}

// kick wakes the goroutine waiting on ch, without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ---- reads of the state, which take Session.mu ----

// current returns the live epoch.
func (c *connState) current() (*epoch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, recipe.ErrSessionClosed
	}
	return c.epoch, nil
}

// epochOf returns the current epoch if it is owner's session, else nil.
func (c *connState) epochOf(owner int64) *epoch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep := c.epoch; ep != nil && ep.id == owner {
		return ep
	}
	return nil
}

// id is Session.ID.
func (c *connState) id() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idLocked()
}

// connected reports whether the state is CONNECTED or RECONNECTED.
func (c *connState) connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.IsConnected()
}
