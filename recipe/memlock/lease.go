package memlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant: a recipe.Lease.
type lease struct {
	m        *Mutex
	sid, eid int64
	token    fence.Token
	ctx      context.Context
	cancel   context.CancelCauseFunc

	mu        sync.Mutex // serializes Release
	releasing bool
	done      bool
}

var _ recipe.Lease = (*lease)(nil)

// Token is the Server's counter as raised by this grant: larger than every
// earlier grant's token of every lock of the Server.
func (l *lease) Token() fence.Token { return l.token }

// Context ends when the lease is released (recipe.ErrReleased) or ownership
// is in doubt: no answered request for TTL/2 (recipe.ErrSuspended), the
// server session expired (recipe.ErrSessionLost), Close or Crash
// (recipe.ErrSessionClosed). It keeps Acquire's context's values only.
func (l *lease) Context() context.Context { return l.ctx }

// Release ends the lease context (recipe.ErrReleased), then deletes the
// grant's entry. The delete is sent even if ctx is done, and retried while
// the Server can't be reached until ctx ends or the TTL passes; an entry not
// deleted by then is deleted by the keep-alive loop once the Server can be
// reached. Idempotent (a call after an error tries the delete again);
// concurrent calls are serialized. Errors:
// recipe.ErrLeaseLost wrapping the cause if ownership had ended before
// (nothing is deleted then: the Session deletes the entry itself, or it went
// with the server session); a *recipe.OpError matching ErrUnreachable when
// the delete could not be made.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	c := l.m.s
	if c.srv.mut == releaseAnyHolder {
		// The mutant deletes "the lock" without checking whose grant it is.
		l.cancel(recipe.ErrReleased)
		_, err := c.call(func(int64) error { c.srv.removeHolder(l.m.name); return nil })
		return err
	}
	c.mu.Lock()
	if _, live := c.leases[l]; live {
		c.endLocked(l, recipe.ErrReleased)
		l.releasing = true
	}
	c.mu.Unlock()
	if !l.releasing {
		return fmt.Errorf("%w: %w", recipe.ErrLeaseLost, context.Cause(l.ctx))
	}
	giveUp := time.Now().Add(c.srv.ttl)
	for {
		_, err := c.call(func(sid int64) error {
			if sid != l.sid {
				return nil // the session expired: the entry went with it
			}
			return c.srv.remove(sid, l.eid)
		})
		if err == nil || errors.Is(err, recipe.ErrSessionLost) {
			l.done = true
			return nil
		}
		if !errors.Is(err, ErrUnreachable) {
			return err
		}
		if ctx.Err() == nil && time.Now().Before(giveUp) {
			select {
			case <-ctx.Done():
			case <-time.After(pollInterval):
				continue
			}
		}
		c.mu.Lock()
		c.orphans = append(c.orphans, orphan{l.sid, l.eid})
		c.mu.Unlock()
		return &recipe.OpError{Op: "release", Path: l.m.name, Err: err}
	}
}
