package memlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Mutex is a lock named by a string on a Session: a recipe.Lock. Mutexes of
// one name on any Sessions of one Server contend for one lock. Each Acquire
// or TryAcquire call is an independent contender (not reentrant).
type Mutex struct {
	s    *Session
	name string
}

var _ recipe.Lock = (*Mutex)(nil)

// New returns the lock named name on session s. Any non-empty string names
// a lock. Errors: recipe.ErrBadOption for a nil Session, one matching
// recipe.ErrInvalidPath for an empty name.
func New(s *Session, name string) (*Mutex, error) {
	switch {
	case s == nil:
		return nil, fmt.Errorf("%w: nil *memlock.Session", recipe.ErrBadOption)
	case name == "":
		return nil, fmt.Errorf("%w: memlock: empty lock name", recipe.ErrInvalidPath)
	}
	return &Mutex{s: s, name: name}, nil
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

func (m *Mutex) acquire(ctx context.Context, try bool) (recipe.Lease, error) {
	c := m.s
	if c.srv.mut == ignoresContext && !try {
		ctx = context.Background()
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	var (
		sid, eid int64
		tok      fence.Token
	)
	for {
		var err error
		sid, err = c.call(func(sid int64) (err error) {
			eid, tok, err = c.srv.enqueue(sid, m.name, try)
			return err
		})
		if err == nil {
			break
		}
		switch {
		case try && errors.Is(err, ErrUnreachable):
			return nil, &recipe.OpError{Op: "enqueue", Path: m.name, Err: err}
		case try || !errors.Is(err, ErrUnreachable) && !errors.Is(err, recipe.ErrSessionLost):
			return nil, err // ErrLocked, ErrSessionClosed; ErrSessionLost of a TryAcquire
		}
		select { // not enqueued: nothing to clean up
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
	for {
		if tok != 0 {
			if l := c.activate(ctx, m, sid, eid, tok); l != nil {
				return l, nil
			}
			if try {
				c.abandon(sid, eid)
				return nil, recipe.ErrSuspended
			}
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
		case err != nil: // unreachable: poll
			changed = nil
		case tok != 0:
			continue
		}
		select {
		case <-changed:
		case <-time.After(pollInterval):
		case <-ctx.Done():
			c.abandon(sid, eid)
			return nil, context.Cause(ctx)
		}
	}
}

// abandon deletes a waiter's entry, or leaves it to the keep-alive loop.
func (c *Session) abandon(sid, eid int64) {
	if c.srv.mut == leakCancelled {
		return
	}
	_ = c.removeEntry(orphan{sid, eid})
}

// activate turns a grant into a lease, unless the Session gave its leases up
// (suspended), its server session changed meanwhile, or it is closed.
func (c *Session) activate(ctx context.Context, m *Mutex, sid, eid int64, tok fence.Token) *lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.suspended || c.sid != sid || c.closed || c.crashed {
		return nil
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &lease{m: m, sid: sid, eid: eid, token: tok, ctx: lctx, cancel: cancel}
	c.leases[l] = struct{}{}
	return l
}
