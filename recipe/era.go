package recipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/isnil"
)

// InEra returns l with every grant's token moved into era g's
// range (fence.Era): a grant whose backend token is r carries
// g.Floor()+r. Order is kept, so the Lock contract holds; and every token is
// above every token of an earlier era, on any backend. This is how
// a lock moves to another backend without stalling its fenced resources:
// the new backend's locks get the next era, and the operator raises
// each fence to its Floor (docs/backends.md#switching-backends). Wrap from
// the start (era 0) to have the range checked before any switch.
//
// A grant whose backend token does not fit (over fence.MaxRawToken), or a g
// past fence.MaxEra, is refused: Acquire and TryAcquire release the
// grant (the release ignores ctx's end, bounded as the backend's Release is)
// and return an error matching fence.ErrTokenOverflow, which
// Permanent reports (only a switch cures it); a failed release is joined to
// it. A nil l (a typed nil too) makes Acquire and TryAcquire return
// ErrBadOption. Everything else is l's: errors, Context, Release.
func InEra(l Lock, g fence.Era) Lock { return &eraLock{l: l, g: g} }

type eraLock struct {
	l Lock
	g fence.Era
}

// Acquire is l's Acquire, its grant's token moved into g's range.
func (m *eraLock) Acquire(ctx context.Context) (Lease, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	lease, err := m.l.Acquire(ctx)
	return m.wrap(ctx, lease, err)
}

// TryAcquire is l's TryAcquire, its grant's token moved into g's range.
func (m *eraLock) TryAcquire(ctx context.Context) (Lease, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	lease, err := m.l.TryAcquire(ctx)
	return m.wrap(ctx, lease, err)
}

// check refuses a nil l (recipe.ErrBadOption: InEra(nil, g), or a typed
// nil, whose methods would panic) and a g past fence.MaxEra.
func (m *eraLock) check() error {
	if isnil.Is(m.l) {
		return fmt.Errorf("%w: InEra of a nil lock", ErrBadOption)
	}
	return m.g.Check()
}

// Unwrap returns the wrapped lock (for a backend's own methods).
func (m *eraLock) Unwrap() Lock { return m.l }

// wrap gives lease its token in g, or releases it when the token does not fit.
func (m *eraLock) wrap(ctx context.Context, lease Lease, err error) (Lease, error) {
	if err != nil {
		return nil, err
	}
	token, err := m.g.Token(lease.Token())
	if err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("recipe: releasing the grant: %w", rerr))
		}
		return nil, err
	}
	return &eraLease{Lease: lease, token: token}, nil
}

// eraLease is a grant of an eraLock: l's lease with its token in g.
type eraLease struct {
	Lease
	token fence.Token
}

// Token returns the grant's token in its era.
func (l *eraLease) Token() fence.Token { return l.token }

// LockDelay forwards the lock-delay the wrapped grant served
// (LockDelayServed).
func (l *eraLease) LockDelay() time.Duration { return LockDelayServed(l.Lease) }
