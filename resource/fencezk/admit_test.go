package fencezk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestFenceAdmit: fencezk.Fence as a fence.Fence. The write's ops land
// with the token; a stale token is refused before write runs; a newer
// write landing while write runs makes Admit refuse after it, applying
// none of its ops; a nil write records the token alone.
func TestFenceAdmit(t *testing.T) {
	cl := zktest.Shared(t)
	s := connect(t, cl)
	in := zktest.Inspect(t, cl)
	ctx := context.Background()
	f, err := fencezk.NewFence(s, "/fences")
	if err != nil {
		t.Fatal(err)
	}
	create := func(p string) func(context.Context) error {
		return func(ctx context.Context) error {
			return fencezk.AddOps(ctx, &zk.CreateRequest{Path: p, Acl: zk.WorldACL(zk.PermAll)})
		}
	}
	if err := f.Admit(ctx, "r", 10, create("/made-by-10")); err != nil || in.Stat("/made-by-10") == nil {
		t.Fatalf("Admit 10: %v", err)
	}
	called := false
	err = f.Admit(ctx, "r", 9, func(context.Context) error { called = true; return nil })
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Highest != 10 || se.Resource != "r" || called {
		t.Fatalf("Admit 9: %v, called %v", err, called)
	}

	reg, _ := f.Register("r")
	err = f.Admit(ctx, "r", 11, func(ctx context.Context) error {
		if _, err := reg.Write(ctx, 12, []byte("newer")); err != nil { // lands meanwhile
			return err
		}
		return create("/made-by-11")(ctx)
	})
	if !errors.As(err, &se) || se.Highest != 12 || in.Stat("/made-by-11") != nil {
		t.Fatalf("Admit 11 overtaken by 12: %v", err)
	}
	if err := f.Admit(ctx, "r", 13, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := reg.Read(ctx); err != nil || v.Token != 13 || string(v.Data) != "newer" {
		t.Fatalf("register %+v %v: want token 13, its value kept", v, err)
	}
	for _, bad := range []string{"", "a/b", "..", "\x00"} {
		if err := f.Admit(ctx, bad, 20, nil); !errors.Is(err, fence.ErrBadResource) {
			t.Fatalf("resource %q: %v", bad, err)
		}
	}
	if err := f.Admit(ctx, "r", 0, nil); !errors.Is(err, fence.ErrNoToken) {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "r", fence.MaxToken+1, nil); !errors.Is(err, fence.ErrTokenOverflow) {
		t.Fatal(err)
	}
}
