// Package multilock holds several locks as one, all or nothing: Curator's
// InterProcessMultiLock, over recipe.Lock, so that the parts may be of any
// backends (a ZooKeeper mutex and a PostgreSQL advisory lock, say).
//
// A Lock takes its parts one by one in a global order, the order of their
// keys, whatever order they were given in: two multi-locks that share
// parts, in any processes, wait for each other's parts in the same order
// and cannot deadlock, provided every process names each lock with the
// same key (a key per lock, such as "zk:/locks/orders"; two keys for one
// lock, or one key for two locks, break the order). A failed or cancelled
// attempt releases every part it took, last taken first, before it
// returns.
//
// A grant is a Lease with one fencing token per part: fence each
// resource with the token of the part that guards it (Lease.Token). Its
// Context ends as soon as any part's does (the cause names the part and
// wraps the part's cause), so that a holder stops when ownership of any
// part is in doubt; the part's own backend states how soon that is.
//
//	m, err := multilock.New(
//		multilock.Part{Key: "zk:/locks/orders", Lock: orders},
//		multilock.Part{Key: "zk:/locks/stock", Lock: stock},
//	)
//	lease, err := m.Acquire(ctx)
//	if err != nil { return err }
//	defer lease.Release(context.Background())
//	err = writeOrder(lease.Context(), lease.Token("zk:/locks/orders"))
//
// A Lock is not a recipe.Lock: a grant of several locks has several
// tokens, and no one of them fences the others' resources.
package multilock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/isnil"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Part is one lock of a multi-lock: Lock, and Key, its name in the global
// order (compared as bytes), the same for that lock in every process.
type Part struct {
	Key  string
	Lock recipe.Lock
}

// Lock is a multi-lock: its parts, in key order. It is safe for
// concurrent use; each Acquire is an independent contender.
type Lock struct {
	parts []Part
}

// New returns a multi-lock over parts (at least one). Errors:
// recipe.ErrBadOption for no parts, an empty or repeated key, a nil Lock
// (a typed nil too), or one Lock value given twice (its second Acquire
// would wait for its first).
func New(parts ...Part) (*Lock, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: multilock: no parts", recipe.ErrBadOption)
	}
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b Part) int { return cmp.Compare(a.Key, b.Key) })
	for i, p := range sorted {
		switch {
		case p.Key == "":
			return nil, fmt.Errorf("%w: multilock: a part without a key", recipe.ErrBadOption)
		case isnil.Is(p.Lock):
			return nil, fmt.Errorf("%w: multilock: part %q has a nil lock", recipe.ErrBadOption, p.Key)
		case i > 0 && sorted[i-1].Key == p.Key:
			return nil, fmt.Errorf("%w: multilock: key %q given twice", recipe.ErrBadOption, p.Key)
		}
		for _, q := range sorted[:i] {
			if sameLock(p.Lock, q.Lock) {
				return nil, fmt.Errorf("%w: multilock: parts %q and %q are one lock", recipe.ErrBadOption, q.Key, p.Key)
			}
		}
	}
	return &Lock{parts: sorted}, nil
}

// sameLock reports whether a and b are the same pointer (a lock is
// usually one; values of other kinds are not compared, as == on them may
// panic, nor pointers to zero-size values, which may share an address).
func sameLock(a, b recipe.Lock) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && va.Type() == vb.Type() && va.Type().Elem().Size() > 0 &&
		va.Pointer() == vb.Pointer()
}

// Keys returns the parts' keys in the order they are taken.
func (m *Lock) Keys() []string {
	keys := make([]string, len(m.parts))
	for i, p := range m.parts {
		keys[i] = p.Key
	}
	return keys
}

// Acquire takes every part in key order, waiting for each, and returns
// the grant once it holds them all. Errors: the error that stops it,
// wrapped with its part's key (ctx's cause; recipe.ErrSessionLost, ...; or
// the loss of a part taken earlier, which stops the wait at once); the
// parts it took are released first (recipe.Lease.Release, ignoring ctx),
// and a removal that failed is joined to the error (its entry is then left
// to that backend's cleanup, as the backend states).
func (m *Lock) Acquire(ctx context.Context) (*Lease, error) { return m.acquire(ctx, true) }

// TryAcquire is Acquire without waiting: a part held by someone else is an
// error matching recipe.ErrLocked, after the parts taken were released.
// Each part's TryAcquire says how long it may wait for a server.
func (m *Lock) TryAcquire(ctx context.Context) (*Lease, error) { return m.acquire(ctx, false) }

func (m *Lock) acquire(ctx context.Context, wait bool) (*Lease, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: multilock: nil context", recipe.ErrBadOption)
	}
	l := newLease(ctx, m.parts)
	// Each part is asked under actx, which also ends when a part taken
	// earlier is lost: waiting on with a lost part would only delay the
	// failure.
	actx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	for _, p := range m.parts {
		var (
			pl  recipe.Lease
			err error
		)
		if wait {
			pl, err = p.Lock.Acquire(actx)
		} else {
			pl, err = p.Lock.TryAcquire(actx)
		}
		switch {
		case err == nil:
			l.add(p.Key, pl, stop)
			if pl.Context().Err() == nil && l.ctx.Err() == nil {
				continue
			}
			err = partCause(p.Key, pl) // lost already (its AfterFunc may not have run yet)
			if l.ctx.Err() != nil {
				err = context.Cause(l.ctx) // or an earlier part was
			}
		case ctx.Err() == nil && actx.Err() != nil:
			err = context.Cause(actx) // a part taken earlier was lost: it names the part
		default:
			err = fmt.Errorf("multilock: part %q: %w", p.Key, err)
		}
		return nil, errors.Join(err, l.undo(context.WithoutCancel(ctx)))
	}
	return l, nil
}

// partCause is the grant's cause when the lease pl of part key ends.
func partCause(key string, pl recipe.Lease) error {
	return fmt.Errorf("multilock: part %q: %w", key, context.Cause(pl.Context()))
}

// Lease is a grant of a multi-lock: one lease per part. Its methods are
// safe for concurrent use.
type Lease struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	keys   []string
	parts  []recipe.Lease // taken so far, in key order
	stops  []func() bool  // the watch of each part's Context

	mu   sync.Mutex // serializes Release
	done []bool     // the part needs no more releasing
}

func newLease(ctx context.Context, parts []Part) *Lease {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	return &Lease{ctx: lctx, cancel: cancel, keys: make([]string, 0, len(parts))}
}

// add records the part key's lease, whose end ends the whole grant's
// Context and stops the acquisition (stop) if it is still going on.
func (l *Lease) add(key string, pl recipe.Lease, stop context.CancelCauseFunc) {
	l.keys = append(l.keys, key)
	l.parts = append(l.parts, pl)
	l.done = append(l.done, false)
	l.stops = append(l.stops, context.AfterFunc(pl.Context(), func() {
		cause := partCause(key, pl)
		l.cancel(cause)
		stop(cause)
	}))
}

// undo releases what a failed attempt took; a part lost (recipe.ErrLeaseLost)
// left nothing to remove, so only the removals that failed are returned.
func (l *Lease) undo(ctx context.Context) error {
	lost := func(err error) bool { return errors.Is(err, recipe.ErrLeaseLost) }
	return errors.Join(slices.DeleteFunc(l.release(ctx), lost)...)
}

// Token returns the fencing token of the part with key (0 for a key that
// is not a part's): fence that part's resource with it.
func (l *Lease) Token(key string) fence.Token {
	if pl := l.Part(key); pl != nil {
		return pl.Token()
	}
	return 0
}

// Part returns the lease of the part with key, nil for a key that is not
// a part's.
func (l *Lease) Part(key string) recipe.Lease {
	if i := slices.Index(l.keys, key); i >= 0 {
		return l.parts[i]
	}
	return nil
}

// Context is done as soon as any part's lease Context is (its cause names
// the part and wraps the part's cause: recipe.ErrSuspended,
// recipe.ErrSessionLost, ...) or the grant is released (recipe.ErrReleased).
// It keeps Acquire's ctx's values only.
func (l *Lease) Context() context.Context { return l.ctx }

// Release ends Context (cause recipe.ErrReleased), then releases every
// part, last taken first, each even if another fails; ctx is passed to each
// part's Release, which removes its grant even if ctx is done, within the
// bound its backend states. It returns nil once every part is removed;
// otherwise the parts' errors joined, each wrapped with its key:
// recipe.ErrLeaseLost for a part lost before Release (nothing to remove;
// every call says so, as the part's own Release does), an *recipe.OpError
// for an unconfirmed removal, which a later call tries again. A nil ctx
// counts as context.Background().
func (l *Lease) Release(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	return errors.Join(l.release(ctx)...)
}

// release is Release, its errors unjoined.
func (l *Lease) release(ctx context.Context) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel(recipe.ErrReleased)
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		if l.done[i] {
			continue
		}
		err := l.parts[i].Release(ctx)
		if err == nil {
			l.done[i] = true
		}
		if err == nil || errors.Is(err, recipe.ErrLeaseLost) {
			l.stops[i]()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("multilock: part %q: %w", l.keys[i], err))
		}
	}
	return errs
}
