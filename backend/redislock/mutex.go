package redislock

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mutex is a lock named by a string on a Session's Redis server. It
// implements recipe.Lock: every Acquire or TryAcquire call is an independent
// contender with its own owner identity; and recipe.HolderObserver (Holder,
// ObserveHolder). Waiters are served in arrival
// order (FIFO): a release hands the lock to the longest-waiting live
// waiter, and wakes only that one.
type Mutex struct {
	s       *Session
	name    string
	key     string // the lock key: the holder's owner id, with a PX expiry
	counter string // the token counter: an integer, never expires, never deleted
	queue   string // the waiters: a sorted set of owner ids, in arrival order
	chbase  string // a waiter's channel is chbase followed by its owner id
	marker  string // the lock-delay marker (delay.go)
	delay   time.Duration
	rep     *grant.Reporter
}

var _ recipe.Lock = (*Mutex)(nil)

// New returns the lock named name on s's server (keys: see WithKeyPrefix).
// A name is what every backend takes: not empty, valid UTF-8, no NUL byte,
// at most MaxNameLen bytes; nothing else is refused (Redis keys hold any
// bytes, and the keys of two names never meet, as each ends with a suffix
// of its own), and every byte counts ("/a" and "a" are two locks).
// Errors: a *NameError (matching recipe.ErrInvalidPath) for another name;
// recipe.ErrBadOption for a nil session or an invalid option (see
// WithLockDelay); an error matching recipe.ErrSessionClosed once Close has
// started. New sends nothing to the server.
func New(s *Session, name string, opts ...MutexOption) (*Mutex, error) {
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
	m := &Mutex{s: s, name: name, key: base + ":holder", counter: base + ":token", queue: base + ":queue",
		chbase: base + ":wake:", marker: base + ":delay", rep: rep}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	if err := grant.CheckDelay("redislock.WithLockDelay", m.delay); err != nil {
		return nil, err
	}
	return m, nil
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

// QueueKey returns the Redis key of the lock's queue: a sorted set of the
// owner ids of the waiting Acquire calls, in arrival order (the score). It
// exists while someone waits, and expires on its own when the waiters are
// gone.
func (m *Mutex) QueueKey() string { return m.queue }

// Acquire waits until the caller holds the lock and returns its lease, or
// returns ctx's cause when ctx ends first. Waiters are served in arrival
// order without polling: a release hands the lock to the queue's head and
// wakes only that waiter. Connection errors are retried for up to the TTL.
// Errors: ctx's cause, recipe.ErrSessionClosed, a *recipe.OpError (wrapping
// a *PermissionError when the server's ACL refused a right). No error
// leaves a key or a queue entry behind (see Acquire in the package
// documentation).
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.measured(ctx, true) }

// TryAcquire takes the lock if it is free now and nobody waits for it. It
// returns an error matching recipe.ErrLocked if someone holds it or waits,
// and otherwise what Acquire returns, without retrying connection errors.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) { return m.measured(ctx, false) }

// kind is the node kind of every lock of this package, as Metrics and the
// loss report name it.
const kind = "lock"

// measured is acquire, reported to the session's Metrics.
func (m *Mutex) measured(ctx context.Context, wait bool) (recipe.Lease, error) {
	a := grant.Begin(m.s.metrics, kind, m.name)
	l, err := m.acquire(ctx, wait)
	a.Done(l, err)
	return l, err
}

// acquire tries, and if wait, subscribes, joins the queue and waits. The
// order is what keeps a wake-up from being lost: the owner joins the queue
// only in a try sent after the server confirmed its subscription, and a
// release wakes only queued owners, so every hand-off to this owner finds
// it subscribed (or, if its connection dropped, skips it: the
// resubscription then wakes it to check again).
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

	owner := newOwner(s.ident)
	var (
		w       *waiter
		served  = grant.NewServing(m.rep, m.delayMax()) // the lock-delay waited out so far
		unknown bool                                    // a request of this owner went unanswered, or queued it: the key or an entry may be ours
		failing time.Time                               // start of the current run of connection errors
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
		queue := w.queued()
		l, pttl, rest, err := m.try(ctx, owner, queue, wait)
		switch {
		case err == nil && l != nil:
			if err := handOut(ctx, l, served.Served()); err != nil {
				unknown = true
				return giveUp(err)
			}
			return l, nil
		case err == nil && rest > 0: // reserved for owner once the lock-delay is over: giving up hands it on
			unknown, failing = true, time.Time{}
			if err := served.Wait(ctx, rest); err != nil {
				return giveUp(err)
			}
			continue
		case err == nil:
			failing = time.Time{}
			b.Reset()
			if queue {
				unknown = true // the queue holds owner: leave it when giving up
				w.inQueue()
			}
			if !wait {
				return giveUp(fmt.Errorf("redislock: %s: %w", m.name, recipe.ErrLocked))
			}
		case ended(ctx):
			unknown = true
			return giveUp(context.Cause(ctx))
		case errors.Is(err, recipe.ErrSessionClosed), errors.Is(err, recipe.ErrNoPermission):
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
		if err := m.awaitTurn(ctx, &w, owner, pttl); err != nil {
			return giveUp(err)
		}
	}
}

// handOut readies the grant l for the caller, who served a lock-delay of
// served for it; or, if the caller gave up while the grant was on its
// way, ends l and returns ctx's cause (the caller then deletes its key).
func handOut(ctx context.Context, l *lease, served time.Duration) error {
	if ctx.Err() != nil {
		l.end(recipe.ErrReleased)
		return context.Cause(ctx)
	}
	l.SetDelayServed(served)
	return nil
}

// awaitTurn is what a waiting Acquire does after a try that found the lock
// taken: the first time, subscribe (and return at once: the next try joins
// the queue); later, wait for a wake-up or the re-check after pttl.
func (m *Mutex) awaitTurn(ctx context.Context, w **waiter, owner string, pttl time.Duration) error {
	if *w == nil {
		var err error
		*w, err = m.subscribe(ctx, owner)
		return err
	}
	return (*w).wait(ctx, m.recheckAfter(pttl))
}

// try sends the acquire script once for owner, joining the queue if
// enqueue. It returns the lease; or the lock key's remaining time if
// someone else holds it (or it is handed to someone else, or, for a call
// that does not wait, a lock-delay is due); or, for a call that waits, the
// rest of a lock-delay after which the lock, reserved for owner meanwhile,
// is owner's to take; or an error after which the key may or may not be
// owner's.
func (m *Mutex) try(ctx context.Context, owner string, enqueue, wait bool) (l *lease, pttl, rest time.Duration, err error) {
	s := m.s
	actx, cancel := context.WithTimeout(ctx, opTimeout(s.ttl))
	defer cancel()
	sent := time.Now()
	res, err := acquireScript.Run(actx, s.cli, []string{m.key, m.counter, m.queue, m.marker},
		owner, s.ttl.Milliseconds(), flag(enqueue), m.chbase, m.delayMs(), flag(wait)).Slice()
	code, n, msg := answer(res)
	switch {
	case err != nil:
		if perr := s.permissionError(err, "the acquire script"); perr != nil {
			err = perr
		}
		return nil, 0, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: classify(ctx, err)}
	case code == -1:
		return nil, 0, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: &PermissionError{Right: s.rightOf(msg, "PUBLISH"), Err: errors.New(msg)}}
	case code == 0 && len(res) == 2:
		return nil, time.Duration(n) * time.Millisecond, 0, nil
	case code == 2 && n > 0:
		return nil, 0, time.Duration(n) * time.Millisecond, nil
	case code != 1 || n < 1:
		return nil, 0, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: fmt.Errorf("unexpected answer %v (is the token counter %s intact?)", res, m.counter)}
	}
	if time.Since(sent) >= lossAfter(s.ttl) {
		// The answer came too late to leave any lease time: ownership is
		// already in doubt. Count it as a failure: the caller asks again
		// with the same owner (a timely answer gives a lease) or deletes
		// the key when it gives up.
		return nil, 0, 0, &recipe.OpError{Op: "acquire", Path: m.key, Err: fmt.Errorf("the answer took %v, more than the lease's %v", time.Since(sent), lossAfter(s.ttl))}
	}
	l = newLease(ctx, m, owner, fence.Token(n))
	if err := s.register(l, sent); err != nil {
		return nil, 0, 0, err
	}
	return l, 0, 0, nil
}

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// answer splits a script's answer {code[, number or message]}; code is -2
// for an answer of another shape.
func answer(res []any) (code, n int64, msg string) {
	code = -2
	if len(res) > 0 {
		if c, ok := res[0].(int64); ok {
			code = c
		}
	}
	if len(res) > 1 {
		n, _ = res[1].(int64)
		msg, _ = res[1].(string)
	}
	return code, n, msg
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

// newOwner returns a new owner id: the session's identity (WithIdentity,
// else host and process), ':' and 130 random bits, so that an operator can
// tell who holds a lock and no two Acquire calls anywhere share one.
func newOwner(ident string) string { return ident + ":" + crand.Text() }

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
