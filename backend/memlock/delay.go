package memlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MutexOption configures a Mutex (New).
type MutexOption func(*Mutex)

// WithLockDelay sets the Mutex's lock-delay to d, with the contract of
// every backend's option (recipe.MaxLockDelay). The Server records on the
// lock the time its held entry ended uncleanly, by the Server (session
// expired or closed) or by its own healed Session after a lost lease; the
// next holder serves its own d from that time
// (docs/lock-delay.md#lock-delay-in-memlock).
func WithLockDelay(d time.Duration) MutexOption { return func(m *Mutex) { m.delay = d } }

// delayLeft is how much of a lock-delay of length d remains on q, on the
// Server's clock.
func (q *queue) delayLeft(d time.Duration) time.Duration {
	if q.unclean.IsZero() || d <= 0 {
		return 0
	}
	return grant.Rest(d, time.Since(q.unclean))
}

// delayLeft reports how much of a lock-delay of length d the granted entry
// eid of session sid must still serve.
func (s *Server) delayLeft(sid, eid int64, d time.Duration) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.entryLocked(sid, eid)
	if err != nil {
		return 0, err
	}
	return s.queueLocked(e.lock).delayLeft(d), nil
}

// hold records that the granted entry eid of session sid is handed out:
// from now on, its removal other than by its Session starts a lock-delay.
// The delay served before it is over.
func (s *Server) hold(sid, eid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.entryLocked(sid, eid)
	if err != nil {
		return err
	}
	q := s.queueLocked(e.lock)
	q.held, q.unclean = e.id, time.Time{}
	return nil
}

// serveDelay serves, through w, what remains of the lock-delay for the
// granted entry eid of session sid, then marks the entry held
// (Server.hold). Errors: ctx's cause, ErrUnreachable (ask again),
// recipe.ErrSessionLost, recipe.ErrNodeDeleted, recipe.ErrSessionClosed.
func (m *Mutex) serveDelay(ctx context.Context, w *grant.Serving, sid, eid int64) error {
	if m.delay <= 0 {
		return nil // without the option a grant records nothing, like the other backends'
	}
	c := m.s
	var left time.Duration
	if err := m.onEntry(sid, func() (err error) { left, err = c.srv.delayLeft(sid, eid, m.delay); return err }); err != nil {
		return err
	}
	if err := w.Wait(ctx, left); err != nil {
		return err
	}
	return m.onEntry(sid, func() error { return c.srv.hold(sid, eid) })
}

// onEntry runs req on the Server for session sid, with await's meaning of
// its errors.
func (m *Mutex) onEntry(sid int64, req func() error) error {
	_, err := m.s.call(func(cur int64) error {
		if cur != sid {
			return errOldSID
		}
		return req()
	})
	switch {
	case errors.Is(err, errOldSID):
		return fmt.Errorf("%w: %w", recipe.ErrSessionLost, err)
	case errors.Is(err, errNoEntry):
		return recipe.ErrNodeDeleted
	}
	return err
}
