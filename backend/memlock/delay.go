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

// WithLockDelay sets the Mutex's lock-delay (Chubby's; see
// recipe.LockDelayServed): a grant that follows an unclean end of the
// previous holder (its session expired or closed without a Release, or
// its lease was lost and its entry deleted afterwards) waits
// d after that end before it is handed out, and meanwhile the lock is not
// free to anyone. 0 (the default) serves none; more than
// recipe.MaxLockDelay makes New fail with recipe.ErrBadOption. Every
// Mutex of a name should be given the same delay: the one served is the
// option of the contender that is next in line.
//
// The Server records the unclean end's time on the lock; a contender that
// gives up while serving the delay leaves that record, so the next one
// serves only the rest. A Mutex without the option records nothing: its
// own unclean end delays nobody.
func WithLockDelay(d time.Duration) MutexOption { return func(m *Mutex) { m.delay = d } }

// delayLeft is how much of a lock-delay of length d remains on q.
func (q *queue) delayLeft(d time.Duration) time.Duration {
	if q.unclean.IsZero() || d <= 0 {
		return 0
	}
	return time.Until(q.unclean.Add(d))
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

// serveDelay serves what remains of the lock-delay for the granted entry
// eid of session sid, then marks the entry held (Server.hold). It returns
// the delay it served; errors: ctx's cause, ErrUnreachable (ask again),
// recipe.ErrSessionLost, recipe.ErrNodeDeleted, recipe.ErrSessionClosed.
func (m *Mutex) serveDelay(ctx context.Context, sid, eid int64) (time.Duration, error) {
	if m.delay <= 0 {
		return 0, nil // without the option a grant records nothing, like the other backends'
	}
	c := m.s
	var left time.Duration
	if err := m.onEntry(sid, func() (err error) { left, err = c.srv.delayLeft(sid, eid, m.delay); return err }); err != nil {
		return 0, err
	}
	if err := grant.ServeDelay(ctx, left, m.rep); err != nil {
		return 0, err
	}
	return max(left, 0), m.onEntry(sid, func() error { return c.srv.hold(sid, eid) })
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
