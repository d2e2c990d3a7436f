package zookeeper

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
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
// ownership deadlines. Its fields are under Session.mu, but for the
// deadlines' pointer, which replies read without it. The transitions, which
// also end leases and cleanup items, are Session methods below. See
// docs/design.md#connection-states-and-the-ownership-deadline.
type connState struct {
	state   recipe.ConnState
	started bool // first session seen
	epoch   *epoch
	// outages counts transitions to a not-connected state (SUSPENDED,
	// LOST): a lease's unchecked release needs none since its registration.
	outages   uint64
	changed   notify.Broadcast              // wakes awaitConnected at every transition
	listeners notify.Listeners[StateChange] // Listen's feeds
	logq      []StateChange                 // logged by Session.unlock
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

// setLocked makes st the state, telling m, the listeners and the log queue.
func (c *connState) setLocked(st recipe.ConnState, cause error, m recipe.Metrics) {
	if c.state == st {
		return
	}
	if m != nil {
		m.SessionState(c.state, st, cause)
	}
	c.state = st
	if !st.IsConnected() {
		c.outages++
	}
	c.changed.Notify()
	ch := StateChange{State: st, SessionID: c.idLocked(), At: time.Now(), Cause: cause}
	c.listeners.Push(ch)
	c.logq = append(c.logq, ch)
}

// ---- transitions (under Session.mu; go-zookeeper's event callback runs
// them, so they never block) ----

// onSessionLocked handles a session established with id: the first, the
// same one again, or a new one that replaces a lost (or presumed lost) one.
func (s *Session) onSessionLocked(id int64) {
	c := &s.conns
	switch {
	case !c.started:
		c.started = true
		c.epoch = newEpoch(id)
		s.leases.newGenerationLocked()
		c.setLocked(recipe.StateConnected, nil, s.cfg.metrics)
	case id == c.epoch.id && c.epoch.cause == nil:
		if c.state == recipe.StateSuspended {
			if s.leases.gen.revoked {
				s.leases.newGenerationLocked()
			}
			c.setLocked(recipe.StateReconnected, nil, s.cfg.metrics)
		}
	default:
		if c.epoch.cause == nil {
			s.loseEpochLocked(fmt.Errorf("%w: server gave a new session 0x%x", recipe.ErrSessionLost, id))
		}
		c.epoch = newEpoch(id)
		s.leases.newGenerationLocked()
		s.cleaner.keepOnlyLocked(id) // other sessions' ephemerals died with them
		c.setLocked(recipe.StateReconnected, nil, s.cfg.metrics)
	}
	s.armLocked()
	kick(s.cleaner.kick)
}

func (s *Session) suspendLocked(cause error) {
	if s.conns.state.IsConnected() {
		s.conns.setLocked(recipe.StateSuspended, cause, s.cfg.metrics)
	}
	if !s.cfg.policy.tolerate {
		s.leases.revokeGenLocked(cause)
	}
}

// loseEpochLocked ends the current ZooKeeper session's ownership for good.
// Deletes waiting for it are moot (its nodes went with it): whoever waits
// for them (Queue.Drain) stops waiting; the items stay, in case a
// presumed-lost session comes back.
func (s *Session) loseEpochLocked(cause error) {
	ep := s.conns.epoch
	if ep == nil || ep.cause != nil {
		return
	}
	ep.cause = cause
	ep.cancel(cause)
	s.disarmLocked()
	s.leases.revokeGenLocked(cause)
	s.cleaner.finishOwnerLocked(ep.id)
	s.conns.setLocked(recipe.StateLost, cause, s.cfg.metrics)
}

// kick wakes the goroutine waiting on ch, without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ---- ownership deadlines, counted from the last server reply ----

// ownership is the pair of ownership deadlines of one session (epoch), in
// grant.Deadline: both count from the send time of the newest request a
// server answered (Session.replied acks them), ownership is suspended
// revokeAfter (the policy's) after it, and the session presumed expired a
// session timeout after it. A connection (re)established arms a new pair
// (armLocked); the session's loss and Close disarm it. The expiry
// deadline is made only once the suspension deadline has passed, from the
// same last reply (it cannot pass earlier: revokeAfter is below the
// timeout), so that a healthy connection's reply acks one deadline.
type ownership struct {
	revokeAfter, timeout time.Duration
	suspend              *grant.Deadline
	expire               atomic.Pointer[grant.Deadline] // nil until suspend has passed; set under Session.mu
}

// ack moves the deadlines to a request sent at sent that was answered.
func (o *ownership) ack(sent time.Time) {
	o.suspend.Ack(sent)
	if e := o.expire.Load(); e != nil {
		e.Ack(sent)
	}
}

func (o *ownership) stop() {
	o.suspend.Stop()
	if e := o.expire.Load(); e != nil {
		e.Stop()
	}
}

// armLocked arms the deadlines of the current session from its last
// server reply (a new session's handshake included), replacing the
// previous pair.
func (s *Session) armLocked() {
	timeout := s.SessionTimeout()
	o := &ownership{revokeAfter: s.cfg.policy.revokeAfter(timeout), timeout: timeout}
	o.suspend = grant.NewDeadline(s.LastServerReply(), o.revokeAfter, s.deadlinePassed)
	if old := s.conns.deadlines.Swap(o); old != nil {
		old.stop()
	}
	o.ack(s.LastServerReply()) // a reply that acked the old pair meanwhile
}

// expireLocked returns o's expiry deadline, made now if it was not.
func (s *Session) expireLocked(o *ownership) *grant.Deadline {
	if e := o.expire.Load(); e != nil {
		return e
	}
	e := grant.NewDeadline(s.LastServerReply(), o.timeout, s.deadlinePassed)
	o.expire.Store(e)
	e.Ack(s.LastServerReply()) // a reply noted before the Store, not acked to e
	return e
}

// disarmLocked stops the deadlines (the session is lost or closed: a new
// session arms its own).
func (s *Session) disarmLocked() {
	if o := s.conns.deadlines.Swap(nil); o != nil {
		o.stop()
	}
}

// replied records that a request sent at sentAt (unix nanoseconds) was
// answered: the last server reply, and the deadlines. It runs on
// go-zookeeper's receive path (through zkwire), without Session.mu.
func (s *Session) replied(sentAt int64) {
	if s.wire.noteReply(sentAt) {
		if o := s.conns.deadlines.Load(); o != nil {
			o.ack(time.Unix(0, sentAt))
		}
	}
}

// deadlinePassed is the deadlines' expire function.
func (s *Session) deadlinePassed() {
	s.mu.Lock()
	defer s.unlock()
	s.checkDeadlinesLocked(time.Now())
}

// checkDeadlinesLocked applies the deadlines that have passed at now: the
// suspension policy, then the client-side expiry. The server heard from us
// no earlier than the send time they count from, so it cannot expire the
// session before that + the session timeout. A deadline applied twice (its
// timer and a deletion event, see onEvent) changes nothing the second time.
func (s *Session) checkDeadlinesLocked(now time.Time) {
	c := &s.conns
	o := c.deadlines.Load()
	if s.closed || c.epoch == nil || o == nil {
		return
	}
	at := o.suspend.At()
	if now.Before(at) {
		return
	}
	dropConn := false
	if c.epoch.cause == nil && !(c.state == recipe.StateSuspended && s.leases.gen.revoked) {
		silent := now.Sub(at.Add(-o.revokeAfter))
		cause := fmt.Errorf("%w: no server reply for %v (policy %s, session timeout %v)", recipe.ErrSuspended, silent.Round(time.Millisecond), s.cfg.policy.describe(), o.timeout)
		s.suspendLocked(cause)
		s.leases.revokeGenLocked(cause)
		dropConn = true
	}
	if c.epoch.cause == nil && !now.Before(s.expireLocked(o).At()) {
		s.loseEpochLocked(fmt.Errorf("%w: no server reply within the session timeout %v; presumed expired", recipe.ErrSessionLost, o.timeout))
		dropConn = true
	}
	if dropConn {
		// Make go-zookeeper reconnect (and so re-validate the session) even
		// if its own read deadline didn't fire (a paused process, a dialer
		// whose connections ignore deadlines): the handshake tells whether
		// the session survived.
		s.wire.dropConn()
	}
}

// awaitConnected blocks until the state is CONNECTED or RECONNECTED.
func (s *Session) awaitConnected(ctx context.Context) error {
	for {
		s.mu.Lock()
		st, ch, closed := s.conns.state, s.conns.changed.C(), s.closed
		s.mu.Unlock()
		if closed {
			return recipe.ErrSessionClosed
		}
		if st.IsConnected() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.quit:
			return recipe.ErrSessionClosed
		}
	}
}

// current returns the live epoch.
func (s *Session) current() (*epoch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, recipe.ErrSessionClosed
	}
	return s.conns.epoch, nil
}

// epochOf returns the current epoch if it is owner's session, else nil.
func (s *Session) epochOf(owner int64) *epoch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep := s.conns.epoch; ep != nil && ep.id == owner {
		return ep
	}
	return nil
}
