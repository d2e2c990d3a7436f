package recipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/isnil"
)

// InEra returns l with every grant's token moved into era g's range
// (fence.Era): a grant whose backend token is r carries g.Floor()+r, so
// order is kept and every token is above every token of an earlier era, on
// any backend: this is how a lock moves to another backend without
// stalling its fenced resources. A backend token over fence.MaxRawToken,
// or a g past fence.MaxEra, makes Acquire and TryAcquire release the
// grant and return an error matching fence.ErrTokenOverflow; a nil l, one
// matching ErrBadOption. Everything else is l's: errors, Context, Release
// (see Eras in the package documentation).
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
