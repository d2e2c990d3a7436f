package fenceetcd_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestAdmit: fencetest's Admit scenario with AddOps (the ops write adds
// land with the token, or not at all).
func TestAdmit(t *testing.T) {
	e := newEnv(t)
	data := e.prefix + "/data"
	f := e.fence(t)
	onStale, reported := fencetest.CountStale()
	f.OnStale = onStale
	fencetest.RunAdmit(t, fencetest.Admit{
		Fence:      f,
		Reported:   reported,
		Add:        func(ctx context.Context, v string) error { return fenceetcd.AddOps(ctx, clientv3.OpPut(data, v)) },
		AddBad:     func(ctx context.Context) error { return fenceetcd.AddOps(ctx, clientv3.OpDelete(e.prefix+"/fence/r")) },
		ErrBad:     fenceetcd.ErrBadOp,
		ErrNoBatch: fenceetcd.ErrNoBatch,
		Get:        func() string { return e.get(t, data) },
	})
}
