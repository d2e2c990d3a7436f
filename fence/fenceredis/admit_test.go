package fenceredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/fence/fenceredis"
)

// admitter is package fence's Fence interface (branch fencehttp), written
// out here until it is on main.
type admitter interface {
	Admit(ctx context.Context, resource string, t fence.Token, write func(ctx context.Context) error) error
}

var _ admitter = (*fenceredis.Fence)(nil)

// TestAdmit: the writes write stages land with the token; a stale token
// is refused before write runs; write's error and a token that becomes
// stale while write runs apply nothing; Stage outside an Admit is refused.
func TestAdmit(t *testing.T) {
	e := newEnv(t)
	var f admitter = e.fence(t)
	ctx := context.Background()
	data := e.prefix + "data"
	stage := func(v string) func(context.Context) error {
		return func(ctx context.Context) error { return fenceredis.Stage(ctx, fenceredis.Set(data, v)) }
	}
	if err := f.Admit(ctx, "r", 5, stage("v5")); err != nil {
		t.Fatal(err)
	}
	called := false
	err := f.Admit(ctx, "r", 4, func(context.Context) error { called = true; return nil })
	if se := (*fence.StaleError)(nil); !errors.As(err, &se) || se.Highest != 5 || called {
		t.Fatalf("stale Admit: %v (write called: %v)", err, called)
	}
	boom := errors.New("boom")
	err = f.Admit(ctx, "r", 6, func(ctx context.Context) error { _ = stage("v6")(ctx); return boom })
	if !errors.Is(err, boom) || e.get(t, data) != "v5" {
		t.Fatalf("failed write: %v, data %q", err, e.get(t, data))
	}
	// A newer holder writes while this write runs: its writes are dropped.
	err = f.Admit(ctx, "r", 6, func(ctx context.Context) error {
		if err := f.Admit(context.Background(), "r", 7, stage("v7")); err != nil {
			return err
		}
		return stage("v6")(ctx)
	})
	if !errors.Is(err, fence.ErrStale) || e.get(t, data) != "v7" {
		t.Fatalf("token stale at commit: %v, data %q", err, e.get(t, data))
	}
	if err := f.Admit(ctx, "r", 7, nil); err != nil {
		t.Fatalf("nil write: %v", err)
	}
	err = f.Admit(ctx, "r", 7, func(ctx context.Context) error {
		return fenceredis.Stage(ctx, fenceredis.Del(e.prefix+"fence:r"))
	})
	if !errors.Is(err, fenceredis.ErrBadWrite) {
		t.Fatalf("staged delete of the fence key: %v", err)
	}
	if err := fenceredis.Stage(ctx, fenceredis.Set(data, "x")); !errors.Is(err, fenceredis.ErrNotInAdmit) {
		t.Fatalf("Stage outside Admit: %v", err)
	}
	if err := f.Admit(ctx, "", 7, nil); !errors.Is(err, fenceredis.ErrBadResource) {
		t.Fatalf("empty resource: %v", err)
	}
	if err := f.Admit(ctx, "r", 0, nil); !errors.Is(err, fence.ErrNoToken) {
		t.Fatalf("zero token: %v", err)
	}
}
