package memlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mutex is a lock named by a string on a Session: a recipe.Lock. Mutexes of
// one name on any Sessions of one Server contend for one lock. Each Acquire
// or TryAcquire call is an independent contender (not reentrant).
type Mutex struct {
	s     *Session
	name  string
	rep   *grant.Reporter // where its leases report their loss
	delay time.Duration   // WithLockDelay
}

var _ recipe.Lock = (*Mutex)(nil)

// MaxNameLen is the longest lock name New accepts, in bytes: the smallest
// of the backends' limits (etcdlock's), so that a name memlock accepts is
// one every backend accepts.
const MaxNameLen = 512

// nameRules are the lock-name rules of every backend (internal/lockname)
// with this package's MaxNameLen: code tested on memlock meets the real
// backends' contract.
var nameRules = lockname.Rules{Backend: "memlock", MaxLen: MaxNameLen}

// New returns the lock named name on session s. A name is what every
// backend takes: not empty, valid UTF-8, no NUL byte, at most MaxNameLen
// bytes. Errors: recipe.ErrBadOption for a nil Session or a bad option, a
// *lockname.Error matching recipe.ErrInvalidPath for another name.
func New(s *Session, name string, opts ...MutexOption) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil *memlock.Session", recipe.ErrBadOption)
	}
	if err := nameRules.Check(name); err != nil {
		return nil, err
	}
	rep := &grant.Reporter{Log: s.log, Metrics: s.metrics, Backend: "memlock", Kind: kindLock, Dir: name}
	m := &Mutex{s: s, name: name, rep: rep}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	if err := grant.CheckDelay("memlock.WithLockDelay", m.delay); err != nil {
		return nil, err
	}
	return m, nil
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// pollInterval is how often a waiter asks again when it was not woken: while
// the Server can't be reached, and as a fallback.
const pollInterval = 20 * time.Millisecond

// Acquire blocks until the caller holds the lock, in arrival order. While
// the Session is cut off it waits for the Server. Errors: ctx's cause (no
// entry is left behind, or one is deleted as soon as the Server can be
// reached), recipe.ErrSessionLost (the server session expired while
// waiting), recipe.ErrNodeDeleted (the entry vanished), and
// recipe.ErrSessionClosed after Close or Crash.
func (m *Mutex) Acquire(ctx context.Context) (recipe.Lease, error) { return m.acquire(ctx, false) }

// TryAcquire takes the lock only if nobody holds it or waits for it.
// Errors: recipe.ErrLocked when held (nothing is left behind), a
// *recipe.OpError matching ErrUnreachable while the Session is cut off,
// ctx's cause, recipe.ErrSessionLost, recipe.ErrSuspended (granted, but the
// Session had just given up its leases), recipe.ErrSessionClosed.
func (m *Mutex) TryAcquire(ctx context.Context) (recipe.Lease, error) { return m.acquire(ctx, true) }

// acquire is Acquire (try false) or TryAcquire, reported to the Session's
// metrics.
func (m *Mutex) acquire(ctx context.Context, try bool) (recipe.Lease, error) {
	a := grant.Begin(m.s.metrics, kindLock, m.name)
	l, err := m.attempt(ctx, try)
	a.Done(l, err)
	return l, err
}

// kindLock is the kind every event of a Mutex is reported with.
const kindLock = "lock"

// attempt is one Acquire or TryAcquire: enqueue, then wait for the grant.
// Its context ends at the Session's Close too.
func (m *Mutex) attempt(ctx context.Context, try bool) (recipe.Lease, error) {
	if m.s.srv.mut == ignoresContext && !try {
		ctx = context.Background()
	}
	ctx, cancel := m.s.g.Bind(ctx)
	defer cancel()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	sid, eid, tok, err := m.enqueue(ctx, try)
	if err != nil {
		return nil, err // not enqueued: nothing to clean up
	}
	return m.await(ctx, try, sid, eid, tok)
}

// enqueue adds the caller's entry to the lock's queue (with try only if the
// lock is free); Acquire waits for the Server while it can't be reached or
// its server session is being replaced. It returns the entry and its token
// (zero while it waits).
func (m *Mutex) enqueue(ctx context.Context, try bool) (sid, eid int64, tok fence.Token, err error) {
	c := m.s
	retry := backoff.NewConstantBackOff(pollInterval)
	for {
		sid, err = c.call(func(sid int64) (err error) {
			eid, tok, err = c.srv.enqueue(sid, m.name, try, m.delay)
			return err
		})
		switch {
		case err == nil:
			return sid, eid, tok, nil
		case try && errors.Is(err, ErrUnreachable):
			return 0, 0, 0, &recipe.OpError{Op: "enqueue", Path: m.name, Err: err}
		case try || !errors.Is(err, ErrUnreachable) && !errors.Is(err, recipe.ErrSessionLost):
			return 0, 0, 0, err // ErrLocked, ErrSessionClosed; ErrSessionLost of a TryAcquire
		}
		if err := loop.Pause(ctx, retry, pollInterval); err != nil {
			return 0, 0, 0, err
		}
	}
}

// await turns entry eid of session sid into a lease once it is granted
// (tok non-zero), waiting in the queue until then. An entry given up is
// deleted, or left to the keep-alive loop.
func (m *Mutex) await(ctx context.Context, try bool, sid, eid int64, tok fence.Token) (recipe.Lease, error) {
	c := m.s
	retry := backoff.NewConstantBackOff(pollInterval)
	waiting := false
	w := grant.NewServing(m.rep, m.delay)
	defer func() {
		if waiting {
			m.reportWaiting(-1)
		}
	}()
	for {
		if tok != 0 {
			err := m.serveDelay(ctx, w, sid, eid)
			if err != nil && !errors.Is(err, ErrUnreachable) {
				c.abandon(sid, eid)
				return nil, err
			}
			if err == nil {
				if l := c.activate(ctx, m, sid, eid, tok); l != nil {
					l.SetDelayServed(w.Served())
					return l, nil
				}
			}
			if try {
				c.abandon(sid, eid)
				return nil, recipe.ErrSuspended
			}
		} else if !waiting {
			waiting = true
			m.reportWaiting(+1)
		}
		var changed <-chan struct{}
		_, err := c.call(func(cur int64) (err error) {
			if cur != sid {
				return errOldSID
			}
			tok, changed, err = c.srv.status(sid, eid)
			return err
		})
		switch {
		case errors.Is(err, errOldSID):
			return nil, fmt.Errorf("%w: %w", recipe.ErrSessionLost, err)
		case errors.Is(err, recipe.ErrSessionLost), errors.Is(err, recipe.ErrSessionClosed):
			return nil, err
		case errors.Is(err, errNoEntry):
			return nil, recipe.ErrNodeDeleted
		case err != nil: // unreachable: ask again after a pause
			changed = nil
		case tok != 0:
			continue
		}
		if err := m.wait(ctx, changed, retry); err != nil {
			c.abandon(sid, eid)
			return nil, err
		}
	}
}

// wait waits for changed (a change of the lock's queue, polled every
// pollInterval as a fallback), or, when changed is nil (the Server could
// not be reached), for the retry's pause. It returns ctx's cause if ctx
// ends first.
func (m *Mutex) wait(ctx context.Context, changed <-chan struct{}, retry backoff.BackOff) error {
	if changed == nil {
		return loop.Pause(ctx, retry, pollInterval)
	}
	select {
	case <-changed:
	case <-time.After(pollInterval):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// reportWaiting reports a waiter's start (+1) or end (-1) to the metrics.
func (m *Mutex) reportWaiting(delta int) {
	if mt := m.s.metrics; mt != nil {
		mt.Waiting(kindLock, m.name, delta)
	}
}

// abandon deletes a waiter's entry, or leaves it to the keep-alive loop.
func (c *Session) abandon(sid, eid int64) {
	if c.srv.mut == leakCancelled {
		return
	}
	_ = c.removeEntry(orphan{sid, eid, false})
}

// activate turns a grant into a lease, unless the Session gave its leases up
// (suspended), its server session changed meanwhile, or it is closed.
func (c *Session) activate(ctx context.Context, m *Mutex, sid, eid int64, tok fence.Token) *lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline == nil || c.sid != sid || c.g.Closed() {
		return nil
	}
	l := &lease{m: m, sid: sid, eid: eid}
	l.Init(ctx, tok, m.rep)
	c.leases[l] = struct{}{}
	return l
}
