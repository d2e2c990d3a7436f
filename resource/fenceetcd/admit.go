package fenceetcd

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/fencebatch"
)

// ErrNoBatch is returned by AddOps for a ctx that is not (derived from)
// the ctx of a write of [Fence.Admit] still running.
var ErrNoBatch = errors.New("fenceetcd: AddOps outside a running write of Fence.Admit")

// AddOps adds ops to the transaction of the [Fence.Admit] whose write got
// ctx: they are applied with its token, or not at all. Each is checked as
// Do checks it. Errors: ErrBadOp (nothing added), ErrNoBatch.
func AddOps(ctx context.Context, ops ...clientv3.Op) error {
	ok, err := fencebatch.Add(ctx, ops...)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNoBatch
	}
	return nil
}

// Admit implements fence.Fence (the interface package fencehttp's
// handler takes). It reads resource's highest token and refuses a lower t
// at once (write is not called); otherwise it calls write, once, with a
// ctx to which [AddOps] adds etcd operations, then applies them with t in
// one transaction (Do), which compares again: if a larger token landed
// meanwhile, Admit returns a *fence.StaleError and none of write's
// operations is applied although write ran. write may be nil (Admit only
// records t). What write does other than AddOps is not fenced. Errors:
// Do's (fence.ErrBadResource for a name fence.CheckResource refuses), and
// write's own as it returned it (nothing applied).
func (f *Fence) Admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error {
	if err := checkToken(t); err != nil {
		return err
	}
	apply := func(ctx context.Context, ops []clientv3.Op) error {
		_, err := f.do(ctx, resource, t, ops)
		return err
	}
	return fencebatch.Admit(ctx, resource, t, f.Highest, f.checkOp, write, apply, f.OnStale)
}

var _ fence.Fence = (*Fence)(nil)
