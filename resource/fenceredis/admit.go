package fenceredis

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/fencebatch"
)

// ErrNoBatch is returned by AddWrites for a ctx that is not (derived
// from) the ctx of a write of [Fence.Admit] still running.
var ErrNoBatch = errors.New("fenceredis: AddWrites outside a running write of Fence.Admit")

// AddWrites adds writes to the script of the [Fence.Admit] whose write got
// ctx: they are applied with its token, or not at all. Do checks them
// (ErrBadWrite, returned by Admit). Errors: ErrNoBatch.
func AddWrites(ctx context.Context, writes ...Write) error {
	if ok, _ := fencebatch.Add(ctx, writes...); !ok {
		return ErrNoBatch
	}
	return nil
}

// Admit implements fence.Fence (the interface package fencehttp's
// handler takes). It reads resource's highest token and refuses a lower t
// at once (write is not called); otherwise it calls write, once, with a
// ctx to which [AddWrites] adds Redis writes, then applies them with t in
// one script (Do), which compares again: if a larger token landed
// meanwhile, Admit returns a *fence.StaleError and none of write's writes
// is applied although write ran. write may be nil (Admit only records t).
// What write does other than AddWrites is not fenced. Errors: Do's
// (fence.ErrBadResource for a name fence.CheckResource refuses), and
// write's own as it returned it (nothing applied).
func (f *Fence) Admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error {
	if err := checkToken(t); err != nil {
		return err
	}
	apply := func(ctx context.Context, writes []Write) error {
		_, err := f.checkedDo(ctx, resource, t, writes)
		return err
	}
	return fencebatch.Admit(ctx, resource, t, f.Highest, nil, write, apply, f.OnStale)
}

var _ fence.Fence = (*Fence)(nil)
