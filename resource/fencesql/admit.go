package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
)

// txKey is the context key of the transaction Admit hands its write.
type txKey struct{}

// TxFrom returns the transaction of the fenced write whose ctx is given
// (or a context derived from it): the write of [Fence.Admit], and so the
// handler of fencehttp.Handler over a *Fence, through r.Context(). ok is
// false outside such a write. Use the transaction as Do's fn would: only
// it is fenced; do not commit or roll it back.
func TxFrom(ctx context.Context) (tx *sql.Tx, ok bool) {
	tx, ok = ctx.Value(txKey{}).(*sql.Tx)
	return tx, ok
}

// Admit makes a *Fence a fence.Fence: it is [Fence.Do], with write called
// with ctx carrying the transaction (TxFrom) instead of the transaction
// itself. What write does through that transaction commits with t, or
// not at all; everything [Fence.Do] says holds (write runs at most once,
// never for a stale t; the errors). A resource name refused with
// ErrBadResource matches fence.ErrBadResource too.
func (f *Fence) Admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error {
	var fn func(*sql.Tx) error
	var werr error
	if write != nil {
		fn = func(tx *sql.Tx) error { werr = write(context.WithValue(ctx, txKey{}, tx)); return werr }
	}
	err := f.do(ctx, resource, t, fn)
	if errors.Is(err, ErrBadResource) {
		err = fmt.Errorf("%w: %w", fence.ErrBadResource, err)
	}
	return fence.Reported(err, werr, f.OnStale)
}

var _ fence.Fence = (*Fence)(nil)
