package recipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
)

// InGeneration returns l with every grant's token moved into generation g's
// range (fence.Generation): a grant whose backend token is r carries
// g.Floor()+r. Order is kept, so the Lock contract holds; and every token is
// above every token of an earlier generation, on any backend. This is how
// a lock moves to another backend without stalling its fenced resources:
// the new backend's locks get the next generation, and the operator raises
// each fence to its Floor (docs/backends.md#switching-backends). Wrap from
// the start (generation 0) to have the range checked before any switch.
//
// A grant whose backend token does not fit (over fence.MaxRawToken), or a g
// past fence.MaxGeneration, is refused: Acquire and TryAcquire release the
// grant (the release ignores ctx's end, bounded as the backend's Release is)
// and return an error matching fence.ErrTokenOverflow, which
// Permanent reports (only a switch cures it); a failed release is joined to
// it. Everything else is l's: errors, Context, Release.
func InGeneration(l Lock, g fence.Generation) Lock { return &genLock{l: l, g: g} }

type genLock struct {
	l Lock
	g fence.Generation
}

// Acquire is l's Acquire, its grant's token moved into g's range.
func (m *genLock) Acquire(ctx context.Context) (Lease, error) {
	if err := m.g.Check(); err != nil {
		return nil, err
	}
	lease, err := m.l.Acquire(ctx)
	return m.wrap(ctx, lease, err)
}

// TryAcquire is l's TryAcquire, its grant's token moved into g's range.
func (m *genLock) TryAcquire(ctx context.Context) (Lease, error) {
	if err := m.g.Check(); err != nil {
		return nil, err
	}
	lease, err := m.l.TryAcquire(ctx)
	return m.wrap(ctx, lease, err)
}

// Unwrap returns the wrapped lock (for a backend's own methods).
func (m *genLock) Unwrap() Lock { return m.l }

// wrap gives lease its token in g, or releases it when the token does not fit.
func (m *genLock) wrap(ctx context.Context, lease Lease, err error) (Lease, error) {
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
	return &genLease{Lease: lease, token: token}, nil
}

// genLease is a grant of a genLock: l's lease with its token in g.
type genLease struct {
	Lease
	token fence.Token
}

// Token returns the grant's token in its generation.
func (l *genLease) Token() fence.Token { return l.token }
