package fenceetcd_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/fence/fenceetcd"
)

// TestAdmit: the ops write adds land with the token; a stale token is
// refused before write runs; write's error and a token that becomes stale
// while write runs apply nothing; AddOps outside an Admit is refused.
func TestAdmit(t *testing.T) {
	e := newEnv(t)
	var f fence.Fence = e.fence(t)
	ctx := context.Background()
	data := e.prefix + "/data"
	add := func(v string) func(context.Context) error {
		return func(ctx context.Context) error { return fenceetcd.AddOps(ctx, clientv3.OpPut(data, v)) }
	}
	if err := f.Admit(ctx, "r", 5, add("v5")); err != nil {
		t.Fatal(err)
	}
	called := false
	err := f.Admit(ctx, "r", 4, func(context.Context) error { called = true; return nil })
	if se := (*fence.StaleError)(nil); !errors.As(err, &se) || se.Highest != 5 || called {
		t.Fatalf("stale Admit: %v (write called: %v)", err, called)
	}
	boom := errors.New("boom")
	err = f.Admit(ctx, "r", 6, func(ctx context.Context) error { _ = add("v6")(ctx); return boom })
	if !errors.Is(err, boom) || e.get(t, data) != "v5" {
		t.Fatalf("failed write: %v, data %q", err, e.get(t, data))
	}
	// A newer holder writes while this write runs: its ops are dropped.
	err = f.Admit(ctx, "r", 6, func(ctx context.Context) error {
		if err := f.Admit(context.Background(), "r", 7, add("v7")); err != nil {
			return err
		}
		return add("v6")(ctx)
	})
	if !errors.Is(err, fence.ErrStale) || e.get(t, data) != "v7" {
		t.Fatalf("token stale at commit: %v, data %q", err, e.get(t, data))
	}
	if err := f.Admit(ctx, "r", 7, nil); err != nil {
		t.Fatalf("nil write: %v", err)
	}
	err = f.Admit(ctx, "r", 7, func(ctx context.Context) error {
		return fenceetcd.AddOps(ctx, clientv3.OpDelete(e.prefix+"/fence/r"))
	})
	if !errors.Is(err, fenceetcd.ErrBadOp) {
		t.Fatalf("an added delete of the fence key: %v", err)
	}
	var kept context.Context // a write's ctx used after its Admit returned
	if err := f.Admit(ctx, "r", 7, func(ctx context.Context) error { kept = ctx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := fenceetcd.AddOps(kept, clientv3.OpPut(data, "x")); !errors.Is(err, fenceetcd.ErrNoBatch) {
		t.Fatalf("added after Admit returned: %v", err)
	}
	if err := fenceetcd.AddOps(ctx, clientv3.OpPut(data, "x")); !errors.Is(err, fenceetcd.ErrNoBatch) {
		t.Fatalf("added outside Admit: %v", err)
	}
	if err := f.Admit(ctx, "", 7, nil); !errors.Is(err, fence.ErrBadResource) {
		t.Fatalf("empty resource: %v", err)
	}
	if err := f.Admit(ctx, "r", 0, nil); !errors.Is(err, fence.ErrNoToken) {
		t.Fatalf("zero token: %v", err)
	}
}
