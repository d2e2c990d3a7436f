package redislock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// waiter is one waiting Acquire's subscription to its own channel, on the
// Session's shared pub/sub connection. The Acquire counts in
// Metrics.Waiting from when it first joined the queue until it returns.
type waiter struct {
	m       *Mutex
	sub     *sub
	counted bool // in Metrics.Waiting
}

// subscribe subscribes owner's channel and waits (up to a third of the
// TTL) for the server's confirmation. Errors: ctx's cause, errClosed, or a
// *PermissionError if the server refused the subscription.
func (m *Mutex) subscribe(ctx context.Context, owner string) (*waiter, error) {
	b, err := m.s.wake.subscribe(ctx, m.chbase+owner, opTimeout(m.s.ttl))
	if err != nil {
		return nil, err
	}
	w := &waiter{m: m, sub: b}
	if ctx.Err() != nil {
		w.close()
		return nil, context.Cause(ctx)
	}
	return w, nil
}

// inQueue is called when a try that joined the queue found the lock taken:
// the caller now waits in the queue.
func (w *waiter) inQueue() {
	if mt := w.m.s.metrics; mt != nil && !w.counted {
		w.counted = true
		mt.Waiting(kind, w.m.name, +1)
	}
}

// queued reports whether the waiter may join the queue: its subscription
// is confirmed, so a hand-off to it reaches it (false for nil).
func (w *waiter) queued() bool { return w != nil && w.sub.confirmed() }

// wait returns after a wake-up (a hand-off, or a confirmation of the
// subscription that came late or after a reconnection), after d, or with
// ctx's cause.
func (w *waiter) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.sub.wake:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// close ends the subscription (nil: none was made).
func (w *waiter) close() {
	if w == nil {
		return
	}
	w.m.s.wake.unsubscribe(w.sub)
	if w.counted {
		w.m.s.metrics.Waiting(kind, w.m.name, -1)
	}
}

// recheckAfter is how long a waiter sleeps without a wake-up, given the
// lock key's PTTL: until the key is due to expire, plus up to a tenth of
// that at random (so that waiters don't all ask at once), never more than
// about the TTL (a key without expiry, PTTL -1, is re-checked every TTL).
func (m *Mutex) recheckAfter(pttl time.Duration) time.Duration {
	d := pttl
	switch {
	case pttl == -2*time.Millisecond: // no key: freed since
		d = 0
	case pttl < 0 || pttl > m.s.ttl: // -1: a key without expiry, not set by this package
		d = m.s.ttl
	}
	return d + time.Millisecond + rand.N(d/10+time.Millisecond)
}

// deleteOwned sends the release script for owner (out of the queue; the
// lock, if owner's, handed to the next waiter or deleted, its grant ending
// as e for the lock-delay marker): the first
// attempt even if ctx is done, then retries on connection errors until ctx
// ends or the TTL has passed (the key, if it was owner's, has expired by
// then). Nil means nothing of owner's is left. A *PermissionError (logged
// at ERROR) means the server's ACL refused the script, or refused to wake
// the waiters after the key was deleted; it is not retried.
func (m *Mutex) deleteOwned(ctx context.Context, owner string, e ending) error {
	s := m.s
	limit := time.Now().Add(s.ttl)
	b := loop.BackOff(50*time.Millisecond, time.Second)
	retry, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(time.Until(limit), opTimeout(s.ttl)))
		res, err := releaseScript.Run(actx, s.cli, []string{m.key, m.queue, m.marker},
			owner, m.chbase, s.ttl.Milliseconds(), m.markerArg(e)).Slice()
		cancel()
		code, _, msg := answer(res)
		var perr error
		switch {
		case err != nil:
			perr = s.permissionError(err, "the release script")
		case code == 2:
			perr = &PermissionError{Right: s.rightOf(msg, "PUBLISH"), Err: errors.New(msg)}
		case code == 0:
			s.log.Debug("redislock: nothing to delete: the key was not ours", "key", m.key, "owner", owner)
			return nil
		default:
			return nil
		}
		if perr != nil && code == 2 {
			s.log.Error("redislock: released, but the server refused to wake the waiters: they find the lock free at their fallback re-check (up to the TTL later)",
				"key", m.key, "err", perr)
			return perr
		}
		if perr != nil {
			s.log.Error("redislock: the server refused a release: the lock is freed when its key expires (within the TTL)", "key", m.key, "err", perr)
			return perr
		}
		if loop.Pause(retry, b, time.Second) != nil {
			return err
		}
	}
}

// discard deletes owner's key and queue entry, if any, for an Acquire that
// failed after a request whose outcome it does not know or that queued it
// (a grant it may have got was never handed out: a clean end for the
// lock-delay; a reservation it had while serving one is handed on and the
// marker left as it is): one attempt now, whatever the caller's context has become, bounded by
// opTimeout; the background retries what that could not confirm.
// unreachable (the last requests met connection errors) skips the attempt:
// the background retries at once.
func (m *Mutex) discard(owner string, unreachable bool) {
	if !unreachable {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout(m.s.ttl))
		err := m.deleteOwned(ctx, owner, clean)
		cancel()
		if err == nil || errors.Is(err, recipe.ErrNoPermission) {
			return
		}
	}
	m.cleanupLater(owner, clean)
}

// cleanupLater deletes owner's key and queue entry (if owner's) in the
// background, ending its grant as e.
func (m *Mutex) cleanupLater(owner string, e ending) {
	s := m.s
	s.life.Go(func() { // not after Close started: the key, if any, expires within the TTL
		if err := m.deleteOwned(s.bg, owner, e); err != nil && !errors.Is(err, recipe.ErrNoPermission) {
			s.log.Warn("redislock: cleanup failed; the key expires within the TTL", "key", m.key, "owner", owner, "err", err)
		}
	})
}
