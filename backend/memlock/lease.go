package memlock

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant: a recipe.Lease on the shared lease core. Its token is
// the Server's counter as raised by this grant. Its context ends with
// recipe.ErrReleased (Release), recipe.ErrSuspended (no answered request
// for TTL/2), recipe.ErrSessionLost (the server session expired) or
// recipe.ErrSessionClosed (Close, Crash); it keeps Acquire's context's
// values only.
type lease struct {
	grant.Core
	m        *Mutex
	sid, eid int64
}

var _ recipe.Lease = (*lease)(nil)

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
	if l.m.s.srv.mut == releaseAnyHolder {
		return l.releaseAnyHolder()
	}
	return l.Core.Release(ctx, l.end, l.remove)
}

// end ends the lease with recipe.ErrReleased if the Session still counts
// it live.
func (l *lease) end() {
	c := l.m.s
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, live := c.leases[l]; live {
		c.endLocked(l, recipe.ErrReleased)
	}
}

// remove deletes the grant's entry, retrying while the Server can't be
// reached until ctx ends or the TTL passes; then it hands the entry to the
// keep-alive loop. An entry of an expired session went with it.
func (l *lease) remove(ctx context.Context) (done bool, err error) {
	c := l.m.s
	giveUp := time.Now().Add(c.srv.ttl)
	retry := backoff.NewConstantBackOff(pollInterval)
	for {
		_, err := c.call(func(sid int64) error {
			if sid != l.sid {
				return nil // the session expired: the entry went with it
			}
			return c.srv.remove(sid, l.eid, true)
		})
		if err == nil || errors.Is(err, recipe.ErrSessionLost) {
			return true, nil
		}
		if !errors.Is(err, ErrUnreachable) {
			return false, err
		}
		if ctx.Err() == nil && time.Now().Before(giveUp) && loop.Pause(ctx, retry, pollInterval) == nil {
			continue
		}
		c.mu.Lock()
		c.orphans = append(c.orphans, orphan{l.sid, l.eid, false})
		c.mu.Unlock()
		return false, &recipe.OpError{Op: "release", Path: l.m.name, Err: err}
	}
}

// releaseAnyHolder is the mutant's Release: it deletes "the lock", whoever
// holds it, without checking whose grant it is or whether it is still ours.
func (l *lease) releaseAnyHolder() error {
	c := l.m.s
	l.End(recipe.ErrReleased)
	_, err := c.call(func(int64) error { c.srv.removeHolder(l.m.name); return nil })
	return err
}
