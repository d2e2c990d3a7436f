package redislock

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mutex is a lock named by a string on a Session's Redis server. It
// implements recipe.Lock: every Acquire or TryAcquire call is an independent
// contender with its own owner identity. Waiters are not queued: when the
// lock is freed, whichever waiter's request reaches the server first gets it
// (no FIFO order, no starvation bound).
type Mutex struct {
	s       *Session
	name    string
	key     string // the lock key: the holder's owner id, with a PX expiry
	counter string // the token counter: an integer, never expires, never deleted
	channel string // pub/sub channel told of every release
	rep     *grant.Reporter
}

var _ recipe.Lock = (*Mutex)(nil)

// New returns the lock named name on s's server (keys: see WithKeyPrefix).
// A name is what every backend takes: not empty, valid UTF-8, no NUL byte,
// at most MaxNameLen bytes; nothing else is refused (Redis keys hold any
// bytes, and the keys of two names never meet, as each ends with a suffix
// of its own), and every byte counts ("/a" and "a" are two locks).
// Errors: a *NameError (matching recipe.ErrInvalidPath) for another name;
// recipe.ErrBadOption for a nil session; an error matching
// recipe.ErrSessionClosed once Close has started. New sends nothing to the
// server.
func New(s *Session, name string) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("redislock: New: %w: nil session", recipe.ErrBadOption)
	}
	if s.life.Closed() {
		return nil, errClosed
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	base := s.prefix + name
	rep := &grant.Reporter{Log: s.log, Metrics: s.metrics, Backend: "redislock", Kind: kind, Dir: name}
	return &Mutex{s: s, name: name, key: base + ":holder", counter: base + ":token", channel: base + ":released", rep: rep}, nil
}

// CheckName returns the error New returns for name (a *NameError matching
// recipe.ErrInvalidPath), or nil if New accepts it: a program can refuse a
// bad name before it connects.
func CheckName(name string) error { return nameRules.Check(name) }

// nameRules are the lock-name rules of every backend (internal/lockname)
// with this package's MaxNameLen.
var nameRules = lockname.Rules{Backend: "redislock", MaxLen: MaxNameLen}

// NameError is the error of New and CheckName for a lock name this package
// refuses: Name is the name as given, Reason the rule it breaks. It matches
// recipe.ErrInvalidPath; its message shows a name over 200 bytes as its
// first 64 bytes and its length. etcdlock and pglock return the same type.
type NameError = lockname.Error

// Name returns the lock's name as given to New.
func (m *Mutex) Name() string { return m.name }

// Key returns the Redis key of the lock: it exists while the lock is held,
// with the holder's owner id as value.
func (m *Mutex) Key() string { return m.key }

// TokenKey returns the Redis key of the lock's token counter: the last token
// granted. It must never be deleted or given an expiry: tokens would start
// again from 1.
func (m *Mutex) TokenKey() string { return m.counter }

// Acquire waits until the caller holds the lock and returns its lease, or
// returns ctx's cause when ctx ends first (also while a request is in
// flight: a grant that lands then is released). Waiting costs no polling: the
// waiter subscribes to the lock's release channel (one pub/sub connection
// while it waits) and tries again on every release notification, and, as
// the fallback for notifications that never come (an expired holder, a lost
// message), when the holder's key is due to expire (its PTTL plus up to a
// tenth of it at random, at most about the TTL).
//
// Connection errors are retried (with jittered exponential backoff from
// 50 ms to 1 s) for up to the TTL; a *recipe.OpError is returned when they
// last longer. Errors: ctx's cause, recipe.ErrSessionClosed (Close
// started), a *recipe.OpError. No error leaves a key behind: when a
// request's answer was lost (or a grant came after ctx ended), the
// owner-checked delete is done before Acquire returns, whatever ctx has
// become, bounded by a third of the TTL (one request); only when the server
// can't be reached does it go on in the background, and the key, if the
// request made one, expires within the TTL anyway.
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.measured(ctx, true) }

// TryAcquire takes the lock if it is free now. It returns an error matching
// recipe.ErrLocked if someone holds it, and otherwise what Acquire returns,
// without retrying connection errors.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) { return m.measured(ctx, false) }

// kind is the node kind of every lock of this package, as Metrics and the
// loss report name it.
const kind = "lock"

// measured is acquire, reported to the session's Metrics.
func (m *Mutex) measured(ctx context.Context, wait bool) (recipe.Lease, error) {
	return grant.Measure(m.s.metrics, kind, m.name, func() (recipe.Lease, error) { return m.acquire(ctx, wait) })
}

func (m *Mutex) acquire(ctx context.Context, wait bool) (recipe.Lease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	s := m.s
	if !s.life.Enter() {
		return nil, errClosed
	}
	defer s.life.Exit()
	ctx, unbind := s.life.Bind(ctx)
	defer unbind()

	owner := newOwner()
	var (
		w       *waiter
		unknown bool      // a request of this owner went unanswered: the key may be ours
		failing time.Time // start of the current run of connection errors
		b       = loop.BackOff(50*time.Millisecond, time.Second)
	)
	defer func() { w.close() }()
	giveUp := func(err error) (recipe.Lease, error) {
		if unknown {
			m.discard(owner, !failing.IsZero())
		}
		return nil, err
	}
	for {
		l, pttl, err := m.try(ctx, owner)
		switch {
		case err == nil && l != nil:
			if ctx.Err() != nil { // the caller gave up while the grant was on its way
				l.end(recipe.ErrReleased)
				unknown = true
				return giveUp(context.Cause(ctx))
			}
			return l, nil
		case err == nil:
			failing = time.Time{}
			b.Reset()
			if !wait {
				return giveUp(fmt.Errorf("redislock: %s: %w", m.name, recipe.ErrLocked))
			}
		case ended(ctx):
			unknown = true
			return giveUp(context.Cause(ctx))
		case errors.Is(err, recipe.ErrSessionClosed):
			unknown = true
			return giveUp(err)
		default:
			unknown = true
			if failing.IsZero() {
				failing = time.Now()
			}
			if !wait || time.Since(failing) >= s.ttl {
				return giveUp(err)
			}
			s.log.Warn("redislock: acquire failed; retrying", "key", m.key, "err", err)
			if err := loop.Pause(ctx, b, time.Second); err != nil {
				return giveUp(err)
			}
			continue
		}
		if w == nil {
			w = m.subscribe(ctx)
		}
		if err := w.wait(ctx, m.recheckAfter(pttl)); err != nil {
			return giveUp(err)
		}
	}
}

// try sends the acquire script once for owner. It returns the lease, or the
// holder key's remaining time if someone else holds the lock, or an error
// after which the key may or may not be owner's.
func (m *Mutex) try(ctx context.Context, owner string) (*lease, time.Duration, error) {
	s := m.s
	actx, cancel := context.WithTimeout(ctx, opTimeout(s.ttl))
	defer cancel()
	sent := time.Now()
	res, err := acquireScript.Run(actx, s.cli, []string{m.key, m.counter}, owner, s.ttl.Milliseconds()).Int64Slice()
	switch {
	case err != nil:
		return nil, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: err}
	case len(res) != 2 || res[0] == 1 && res[1] < 1:
		return nil, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: fmt.Errorf("unexpected answer %v (is the token counter %s intact?)", res, m.counter)}
	case res[0] == 0:
		return nil, time.Duration(res[1]) * time.Millisecond, nil
	}
	if time.Since(sent) >= lossAfter(s.ttl) {
		// The answer came too late to leave any lease time: ownership is
		// already in doubt. Count it as a failure: the caller asks again
		// with the same owner (a timely answer gives a lease) or deletes
		// the key when it gives up.
		return nil, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: fmt.Errorf("the answer took %v, more than the lease's %v", time.Since(sent), lossAfter(s.ttl))}
	}
	l := newLease(ctx, m, owner, fence.Token(res[1]))
	if err := s.register(l, sent); err != nil {
		return nil, 0, err
	}
	return l, 0, nil
}

// deleteOwned sends the release script for owner: the first attempt even if
// ctx is done, then retries on errors until ctx ends or the TTL has passed
// (the key, if it was owner's, has expired by then). Nil means the key is not
// owner's any more (deleted now or before).
func (m *Mutex) deleteOwned(ctx context.Context, owner string) error {
	s := m.s
	limit := time.Now().Add(s.ttl)
	b := loop.BackOff(50*time.Millisecond, time.Second)
	retry, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(time.Until(limit), opTimeout(s.ttl)))
		n, err := releaseScript.Run(actx, s.cli, []string{m.key}, owner, m.channel).Int64()
		cancel()
		if err == nil {
			if n == 0 {
				s.log.Debug("redislock: nothing to delete: the key was not ours", "key", m.key, "owner", owner)
			}
			return nil
		}
		if loop.Pause(retry, b, time.Second) != nil {
			return err
		}
	}
}

// discard deletes owner's key, if it is owner's, for an Acquire that failed
// after a request whose outcome it does not know: one attempt now, whatever
// the caller's context has become, bounded by opTimeout; the background
// retries what that could not confirm. unreachable (the last requests met
// connection errors) skips the attempt: the background retries at once.
func (m *Mutex) discard(owner string, unreachable bool) {
	if !unreachable {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout(m.s.ttl))
		err := m.deleteOwned(ctx, owner)
		cancel()
		if err == nil {
			return
		}
	}
	m.cleanupLater(owner)
}

// ended reports whether ctx is done or its deadline has passed. A request
// bounded by ctx's deadline fails with a timeout at that deadline, which can
// come before ctx's own timer has marked it done: that is the caller's
// deadline, not a connection error to log and retry. ended then waits for
// ctx to be marked done, so that context.Cause(ctx) is set.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		<-ctx.Done()
		return true
	}
	return false
}

// cleanupLater deletes owner's key (if it is owner's) in the background.
func (m *Mutex) cleanupLater(owner string) {
	s := m.s
	s.life.Go(func() { // not after Close started: the key, if any, expires within the TTL
		if err := m.deleteOwned(s.bg, owner); err != nil {
			s.log.Warn("redislock: cleanup failed; the key expires within the TTL", "key", m.key, "owner", owner, "err", err)
		}
	})
}

// recheckAfter is how long a waiter sleeps without a notification, given
// the holder key's PTTL: until the key is due to expire, plus up to a tenth
// of that at random (so that waiters don't all ask at once), never more than
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

// waiter is a subscription to a lock's release channel, held by one waiting
// Acquire, which counts in Metrics.Waiting while it has one.
type waiter struct {
	m    *Mutex
	ps   *redis.PubSub
	stop func() bool
	b    backoff.BackOff // between attempts after the subscription's connection failed
}

// subscribe subscribes to m's release channel. SUBSCRIBE is only sent here;
// the server's confirmation is the first thing wait receives, and every
// receipt makes the caller try again, so a release that happens before the
// subscription is active is seen by that try.
func (m *Mutex) subscribe(ctx context.Context) *waiter {
	if m.s.metrics != nil {
		m.s.metrics.Waiting(kind, m.name, +1)
	}
	ps := m.s.cli.Subscribe(ctx, m.channel) // an error resurfaces in wait, which reconnects
	// go-redis ends a blocked receive at a deadline but not on cancellation:
	// closing the subscription does.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	return &waiter{m: m, ps: ps, stop: stop, b: loop.BackOff(50*time.Millisecond, time.Second)}
}

// wait returns after a message on the channel (a release, or the
// subscription's confirmation), after d, or with ctx's cause. When the
// subscription's connection fails (messages may have been lost) it waits a
// backoff interval, at most d, and returns nil: the caller checks the lock
// again either way.
func (w *waiter) wait(ctx context.Context, d time.Duration) error {
	_, err := w.ps.ReceiveTimeout(ctx, d)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err == nil:
		w.b.Reset()
		return nil
	case isTimeout(err):
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_ = loop.Pause(pctx, w.b, time.Second)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// close ends the subscription (nil: none was made).
func (w *waiter) close() {
	if w == nil {
		return
	}
	w.stop()
	_ = w.ps.Close()
	if mt := w.m.s.metrics; mt != nil {
		mt.Waiting(kind, w.m.name, -1)
	}
}

// newOwner returns a new owner id: host, process and 130 random bits, so
// that an operator can tell who holds a lock and no two Acquire calls
// anywhere share one.
func newOwner() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + crand.Text()
}

// The deadlines of the recipe, as fractions of the TTL.

// renewEvery is the time from the send of the last successful SET or
// renewal to the next renewal.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

// lossAfter is the time from the send of the last successful SET or renewal
// to the end of the lease context (cause recipe.ErrSuspended). The server
// keeps the key for the TTL from when it ran the request, which is later:
// the third in between is the margin for timer and scheduling delays.
func lossAfter(ttl time.Duration) time.Duration { return ttl * 2 / 3 }

// opTimeout bounds one acquire or release request.
func opTimeout(ttl time.Duration) time.Duration { return ttl / 3 }
