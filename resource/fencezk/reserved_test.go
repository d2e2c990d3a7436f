package fencezk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestRegisterRefusesQueueNodeNames (issue 23, finding 4): a register is a
// persistent znode in the recipes' tree, so one named like a queue node
// ("P/_c_<guid>-lock-<seq>") would hold the lock P for ever. New refuses
// such a path, and Apply an operation on one (or a sequential create that
// would make such a name), before anything is sent;
// the lock P stays free.
func TestRegisterRefusesQueueNodeNames(t *testing.T) {
	cl := zktest.Shared(t)
	s := connect(t, cl)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const p = "/app/P"
	bad := p + "/_c_00000000000000000000000000000000-lock-0000000000"

	r, err := fencezk.New(s, bad)
	if !errors.Is(err, zookeeper.ErrReservedName) || !errors.Is(err, recipe.ErrInvalidPath) {
		t.Errorf("New(%s) = %v, want zookeeper.ErrReservedName", bad, err)
	}
	if err == nil { // what the old code let happen
		if _, err := r.Write(ctx, 1, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}

	reg := newRegister(t, s, "/app/reg")
	for _, op := range []*zk.CreateRequest{
		{Path: bad, Acl: zk.WorldACL(zk.PermAll)},
		// The server appends the sequence: the same name, made another way.
		{Path: p + "/_c_00000000000000000000000000000000-lock-", Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeralSequential},
	} {
		_, _, err = reg.Apply(ctx, 1, op)
		if !errors.Is(err, fencezk.ErrBadOp) || !errors.Is(err, zookeeper.ErrReservedName) {
			t.Errorf("Apply creating %s (flags %d): %v, want fencezk.ErrBadOp and zookeeper.ErrReservedName", op.Path, op.Flags, err)
		}
	}
	if c := in.Children(p); len(c) != 0 {
		t.Errorf("%s holds %v", p, c)
	}

	m, err := mutex.New(s, p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the lock %s: %v (want it free)", p, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
