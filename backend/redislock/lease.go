package redislock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant of a Mutex: the lock key holds owner, with an expiry
// that a renewer goroutine sets again every third of the TTL. A watchdog
// timer ends the lease context (recipe.ErrSuspended) 2/3 of the TTL after the
// send time of the last successful SET or renewal; the server keeps the key
// for at least the TTL after that send (it ran the request later).
type lease struct {
	m      *Mutex
	owner  string
	token  fence.Token
	ctx    context.Context
	cancel context.CancelCauseFunc // called only by end, under Session.mu

	dmu      sync.Mutex
	deadline time.Time   // when the watchdog ends the lease unless a renewal succeeds
	watchdog *time.Timer // set by start

	mu       sync.Mutex // serializes Release
	released bool       // the key is deleted (or was not ours any more)
}

var _ recipe.Lease = (*lease)(nil)

// newLease returns the lease of a grant; its context keeps ctx's values only.
func newLease(ctx context.Context, m *Mutex, owner string, token fence.Token) *lease {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	return &lease{m: m, owner: owner, token: token, ctx: lctx, cancel: cancel}
}

// start arms the watchdog for the grant sent at sent and starts the renewer,
// which Session.register has counted among the session's ops.
func (l *lease) start(sent time.Time) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	l.deadline = sent.Add(lossAfter(l.m.s.ttl))
	l.watchdog = time.AfterFunc(time.Until(l.deadline), func() {
		l.lose(recipe.ErrSuspended, "no renewal succeeded before the lease's deadline")
	})
	go l.keepAlive(sent)
}

// Token returns the grant's fencing token: the value of the lock's token
// counter after the INCR that came with the grant.
func (l *lease) Token() fence.Token { return l.token }

// Context is done when ownership is released (recipe.ErrReleased) or in
// doubt: no renewal succeeded in time (recipe.ErrSuspended), a renewal found
// the key deleted or held by another owner (recipe.ErrNodeDeleted), or the
// session was closed (recipe.ErrSessionClosed).
func (l *lease) Context() context.Context { return l.ctx }

// Release ends the lease context (cause recipe.ErrReleased), stops the
// renewals and deletes the lock key if it still holds this grant's owner
// (one script: compare, DEL, PUBLISH to the waiters). The delete is sent even
// if ctx is done, and retried on connection errors until ctx ends or the TTL
// passes; one that fails is also retried in the background (and the key
// expires within the TTL anyway).
//
// Release is idempotent and can be retried after an error; concurrent calls
// are serialized. Errors: recipe.ErrLeaseLost wrapping the cause if
// ownership had ended before (nothing is sent then); a *recipe.OpError if the
// delete could not be confirmed; one matching recipe.ErrSessionClosed after
// Close.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.end(recipe.ErrReleased)
	if cause := context.Cause(l.ctx); cause != recipe.ErrReleased {
		return fmt.Errorf("%w (%w)", recipe.ErrLeaseLost, cause)
	}
	s := l.m.s
	if !s.beginOp() {
		return errClosed
	}
	defer s.ops.Done()
	if err := l.m.deleteOwned(ctx, l.owner); err != nil {
		l.m.cleanupLater(l.owner)
		return &recipe.OpError{Op: "release", Path: l.m.key, Err: err}
	}
	l.released = true
	return nil
}

// end ends the lease with cause if it is live, and reports whether it was.
// The context is cancelled under the session's lock, so that whoever finds
// the lease no longer live also finds its cause set.
func (l *lease) end(cause error) bool {
	s := l.m.s
	s.mu.Lock()
	_, live := s.leases[l]
	if live {
		delete(s.leases, l)
		l.cancel(cause)
	}
	s.mu.Unlock()
	if live {
		l.dmu.Lock()
		l.watchdog.Stop()
		l.dmu.Unlock()
	}
	return live
}

// lose ends the lease because ownership is in doubt. A lease that gave up
// (ErrSuspended) while its key may still be its own deletes the key in the
// background, owner-checked, as soon as the server answers: renewals the
// network held back may still reach the server and extend the key, and
// nobody alive holds it (a renewal that lands after the delete finds no key
// of its owner and changes nothing).
func (l *lease) lose(cause error, why string) {
	if !l.end(cause) {
		return
	}
	l.m.s.log.Info("redislock: lease lost", "key", l.m.key, "token", l.token, "cause", cause, "why", why)
	if cause == recipe.ErrSuspended {
		l.m.cleanupLater(l.owner)
	}
}

// extend moves the deadline to lossAfter from at, the send time of a
// renewal that succeeded, unless the lease has ended (or the watchdog has
// fired and is ending it).
func (l *lease) extend(at time.Time) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.ctx.Err() != nil || !l.watchdog.Stop() {
		return
	}
	l.deadline = at.Add(lossAfter(l.m.s.ttl))
	l.watchdog.Reset(time.Until(l.deadline))
}

func (l *lease) currentDeadline() time.Time {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.deadline
}

// keepAlive renews the lease every third of the TTL, counted from the send
// time of the last success, and retries a failed renewal with backoff until
// it succeeds or the watchdog ends the lease. A renewal answered "not ours"
// ends the lease at once.
func (l *lease) keepAlive(sent time.Time) {
	s := l.m.s
	defer s.ops.Done()
	every := renewEvery(s.ttl)
	b := loop.BackOff(every/10, every/2)
	next := sent.Add(every)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		at := time.Now()
		r, err := l.renew()
		switch {
		case l.ctx.Err() != nil:
			return
		case err == nil && r == renewed:
			l.extend(at)
			b.Reset()
			next = at.Add(every)
		case err == nil && r == renewedLate:
			l.lose(recipe.ErrSuspended, "the server ran the renewal after the lease's deadline (clock rates differ)")
			return
		case err == nil:
			l.lose(recipe.ErrNodeDeleted, "a renewal found the key deleted or held by another owner")
			return
		default:
			s.log.Warn("redislock: renewal failed; retrying until the lease's deadline", "key", l.m.key,
				"deadline", time.Until(l.currentDeadline()).Round(time.Millisecond), "err", err)
			next = time.Now().Add(b.NextBackOff())
		}
	}
}

// renew sends the renewal script, bounded by the lease's deadline (a
// renewal answered after it could not save the lease).
func (l *lease) renew() (renewal, error) {
	ctx, cancel := context.WithDeadline(l.ctx, l.currentDeadline())
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

// renewAs sends the renewal script for owner once: 1 extended, 0 not
// owner's, -1 run too late (not extended).
func (m *Mutex) renewAs(ctx context.Context, owner string) (int64, error) {
	ttl := m.s.ttl
	return renewScript.Run(ctx, m.s.cli, []string{m.key}, owner, ttl.Milliseconds(), (ttl - lossAfter(ttl)).Milliseconds()).Int64()
}
