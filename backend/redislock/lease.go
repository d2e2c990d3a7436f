package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The causes of a lease's loss, each matching the recipe's sentinel and
// saying why.
var (
	errNoRenewal   = fmt.Errorf("%w: no renewal succeeded before the lease's deadline", recipe.ErrSuspended)
	errNotOurs     = fmt.Errorf("%w: a renewal found the key deleted or held by another owner", recipe.ErrNodeDeleted)
	errLateRenewal = fmt.Errorf("%w: the server ran the renewal after the lease's deadline (clock rates differ)", recipe.ErrSuspended)
)

// lease is one grant of a Mutex: the lock key holds owner, with an expiry
// that a renewer sets again every third of the TTL. Its context ends when
// Release is called (recipe.ErrReleased), when the deadline passes with no
// renewal acknowledged (lossAfter the send of the last one:
// recipe.ErrSuspended), when a renewal finds the key not owner's
// (recipe.ErrNodeDeleted) or at Close (recipe.ErrSessionClosed). It is live
// while it is in its Session's leases.
type lease struct {
	grant.Core
	m        *Mutex
	owner    string
	deadline *grant.Deadline // set by Session.register
}

var _ recipe.Lease = (*lease)(nil)

// newLease returns the lease of a grant; its context keeps ctx's values only.
func newLease(ctx context.Context, m *Mutex, owner string, token fence.Token) *lease {
	l := &lease{m: m, owner: owner}
	l.Init(ctx, token, m.rep)
	return l
}

// Release ends the lease context (cause recipe.ErrReleased), stops the
// renewals and frees the lock if its key still holds this grant's owner
// (one script: compare, then hand the lock to the longest-waiting live
// waiter and wake it, or DEL). It is sent even if ctx is done, and retried
// on connection errors until ctx ends or the TTL passes; one that fails is
// also retried in the background (and the key expires within the TTL
// anyway). Idempotent and serialized; errors: recipe.ErrLeaseLost wrapping
// the cause if ownership had ended before (nothing is sent then); a
// *recipe.OpError if the release could not be confirmed, wrapping a
// *PermissionError (recipe.ErrNoPermission, logged at ERROR) if the
// server's ACL refused it or refused to wake the waiters after the key was
// deleted; one matching recipe.ErrSessionClosed after Close.
func (l *lease) Release(ctx context.Context) error {
	s := l.m.s
	if !s.life.Enter() {
		// Close has started: it ends every live lease and deletes its key.
		wait := func() { <-l.Context().Done() }
		return l.Core.Release(ctx, wait, func(context.Context) (bool, error) { return false, errClosed })
	}
	defer s.life.Exit()
	return l.Core.Release(ctx, func() { l.end(recipe.ErrReleased) }, l.remove)
}

// remove deletes the key of a released lease, or leaves it to a background
// cleanup when the delete could not be confirmed.
// A refusal of the server's ACL is returned as it is, not retried: the key
// was deleted but the waiters not told, or the script was refused and the
// key expires within the TTL.
func (l *lease) remove(ctx context.Context) (bool, error) {
	err := l.m.deleteOwned(ctx, l.owner, clean)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, recipe.ErrNoPermission):
		return true, &recipe.OpError{Op: "release", Path: l.m.key, Err: err}
	}
	l.m.cleanupLater(l.owner, clean)
	return false, &recipe.OpError{Op: "release", Path: l.m.key, Err: err}
}

// end ends the lease with cause if it is live, and reports whether it was.
// It is taken out of the session's leases and ended under the session's
// lock, so that whoever finds it no longer there also finds its cause set.
func (l *lease) end(cause error) bool {
	s := l.m.s
	s.mu.Lock()
	_, live := s.leases[l]
	if live {
		delete(s.leases, l)
		l.End(cause)
	}
	s.mu.Unlock()
	if live {
		l.deadline.Stop()
	}
	return live
}

// lose ends the lease because ownership is in doubt. A lease that gave up
// (recipe.ErrSuspended) while its key may still be its own deletes the key
// in the background, owner-checked, as soon as the server answers:
// renewals the network held back may still reach the server and extend the
// key, and nobody alive holds it. The delete is an unclean end: a
// lock-delay runs from it.
func (l *lease) lose(cause error) {
	if l.end(cause) && errors.Is(cause, recipe.ErrSuspended) {
		l.m.cleanupLater(l.owner, unclean)
	}
}

// keepAlive renews the lease every third of the TTL, counted from the send
// time of the last success, and retries a failed renewal with backoff until
// it succeeds or the deadline ends the lease. A renewal answered "not ours"
// or "too late" ends the lease at once.
func (l *lease) keepAlive(sent time.Time) {
	ctx := l.Context()
	every := renewEvery(l.m.s.ttl)
	b := loop.BackOff(every/10, every/2)
	next := sent.Add(every)
	for {
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		at := time.Now()
		r, err := l.renew()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && r == renewed:
			l.deadline.Ack(at)
			b.Reset()
			next = at.Add(every)
		case err == nil && r == renewedLate:
			l.lose(errLateRenewal)
			return
		case err == nil:
			l.lose(errNotOurs)
			return
		default:
			level := slog.LevelWarn
			if errors.Is(err, recipe.ErrNoPermission) { // revoked while the lease runs: no retry will help
				level = slog.LevelError
			}
			l.m.s.log.Log(ctx, level, "redislock: renewal failed; retrying until the lease's deadline", "key", l.m.key,
				"deadline", time.Until(l.deadline.At()).Round(time.Millisecond), "err", err)
			if loop.Pause(ctx, b, every/2) != nil {
				return
			}
			next = time.Time{}
		}
	}
}

// renew sends the renewal script, bounded by the lease's deadline (a
// renewal answered after it could not save the lease).
func (l *lease) renew() (renewal, error) {
	ctx, cancel := context.WithDeadline(l.Context(), l.deadline.At())
	defer cancel()
	n, err := l.m.renewAs(ctx, l.owner)
	return renewal(n), err
}

// renewal is the renewal script's answer.
type renewal int64

const (
	renewedLate renewal = -1 // the server ran it after the lease's deadline: not extended
	notOurs     renewal = 0  // the key is deleted or another owner's
	renewed     renewal = 1
)

// renewAs sends the renewal script for owner once: 1 extended (and the
// lock-delay marker with it), 0 not owner's, -1 run too late (not
// extended).
func (m *Mutex) renewAs(ctx context.Context, owner string) (int64, error) {
	ttl := m.s.ttl
	n, err := renewScript.Run(ctx, m.s.cli, []string{m.key, m.marker},
		owner, ttl.Milliseconds(), (ttl - lossAfter(ttl)).Milliseconds(), m.markerTTL()).Int64()
	if perr := m.s.permissionError(err, "the renewal script"); perr != nil {
		err = perr
	}
	return n, err
}
