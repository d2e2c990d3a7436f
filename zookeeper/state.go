package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// ZooKeeper session it concerns (epoch), and who hears of transitions. Its
// fields are under Session.mu. The transitions, which also end leases and
// cleanup items, are Session methods below; the watchdog applies the
// ownership deadlines. See
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
	kick      chan struct{}                 // wakes the watchdog
}

func newConnState() connState {
	return connState{kick: make(chan struct{}, 1)}
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
	kick(s.cleaner.kick)
	kick(c.kick)
}

func (s *Session) suspendLocked(cause error) {
	if s.conns.state.IsConnected() {
		s.conns.setLocked(recipe.StateSuspended, cause, s.cfg.metrics)
	}
	if !s.cfg.policy.tolerate {
		s.leases.revokeGenLocked(cause)
	}
	kick(s.conns.kick)
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
	s.leases.revokeGenLocked(cause)
	s.cleaner.finishOwnerLocked(ep.id)
	s.conns.setLocked(recipe.StateLost, cause, s.cfg.metrics)
}

// unlock releases s.mu and then logs the transitions recorded meanwhile, so
// that a slow (or re-entrant) log handler never runs under the mutex nor
// stalls go-zookeeper's event dispatch for longer than it takes to log.
// The first CONNECTED and the LOST of Close are not logged as transitions:
// Connect logs "session connected", Close "session closed".
func (s *Session) unlock() {
	q, closed := s.conns.logq, s.closed
	s.conns.logq = nil
	s.mu.Unlock()
	for _, ch := range q {
		if ch.State == recipe.StateConnected || (ch.State == recipe.StateLost && errors.Is(ch.Cause, recipe.ErrSessionClosed)) {
			continue
		}
		lvl := slog.LevelInfo
		if (ch.State == recipe.StateSuspended || ch.State == recipe.StateLost) && !closed {
			lvl = slog.LevelWarn
		}
		s.log.Log(context.Background(), lvl, "connection state", "state", ch.State.String(),
			"session", fmt.Sprintf("0x%x", ch.SessionID), "cause", ch.Cause)
	}
}

// kick wakes the goroutine waiting on ch, without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ---- watchdog: ownership deadlines counted from the last server reply ----

func (s *Session) watchdog() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.checkDeadlines(time.Now())
		timer.Reset(next)
		select {
		case <-s.quit:
			return
		case <-timer.C:
		case <-s.conns.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// checkDeadlines applies the suspension policy and the client-side expiry,
// and returns how long to sleep before the next check.
func (s *Session) checkDeadlines(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.unlock()
	return s.checkDeadlinesLocked(now)
}

// checkDeadlinesLocked is checkDeadlines under s.mu. Deadlines count from
// the send time of the newest request a server answered: the server heard
// from us no earlier than that, so it cannot expire the session before
// that + the session timeout.
func (s *Session) checkDeadlinesLocked(now time.Time) time.Duration {
	c := &s.conns
	if s.closed || c.epoch == nil {
		return time.Hour
	}
	timeout := s.SessionTimeout()
	revokeAfter := s.cfg.policy.revokeAfter(timeout)
	silent := now.Sub(s.LastServerReply())
	dropConn := false
	if c.epoch.cause == nil && silent >= revokeAfter && !(c.state == recipe.StateSuspended && s.leases.gen.revoked) {
		cause := fmt.Errorf("%w: no server reply for %v (policy %s, session timeout %v)", recipe.ErrSuspended, silent.Round(time.Millisecond), s.cfg.policy, timeout)
		s.suspendLocked(cause)
		s.leases.revokeGenLocked(cause)
		dropConn = true
	}
	if c.epoch.cause == nil && silent >= timeout {
		s.loseEpochLocked(fmt.Errorf("%w: no server reply within the session timeout %v; presumed expired", recipe.ErrSessionLost, timeout))
		dropConn = true
	}
	if dropConn {
		// Make go-zookeeper reconnect (and so re-validate the session) even
		// if its own read deadline didn't fire (a paused process, a dialer
		// whose connections ignore deadlines): the handshake tells whether
		// the session survived.
		s.wire.dropConn()
	}
	switch {
	case c.epoch.cause != nil:
		return time.Hour // a new session will kick us
	case silent < revokeAfter:
		return revokeAfter - silent
	case silent < timeout:
		return timeout - silent
	}
	return time.Hour
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
