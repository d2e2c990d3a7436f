package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestProclaim: a leader publishes a new value without another election:
// an observer on another session gets it, with the same token; Leader
// reads it; Release afterwards deletes the node. Without a leadership,
// Proclaim is ErrNotLeader and writes nothing; a value too large is
// refused as Campaign's is.
func TestProclaim(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const dir = "/elect/proclaim"
	e := newElection(t, rtest.Connect(t, cl), dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Proclaim(ctx, []byte("early")); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim before leading: %v, want ErrNotLeader", err)
	}
	lease := campaign(t, e, "v1")
	obs := newElection(t, rtest.Connect(t, cl), dir).Observe(ctx)
	if o := next(t, obs, 10*time.Second); string(o.Leader.Value) != "v1" {
		t.Fatalf("first observation %v (%q)", o, o.Leader.Value)
	}
	for _, v := range []string{"v2", "v3"} {
		if err := e.Proclaim(ctx, []byte(v)); err != nil {
			t.Fatalf("Proclaim(%s): %v", v, err)
		}
		o := next(t, obs, 10*time.Second)
		if string(o.Leader.Value) != v || o.Leader.Token != lease.Token() {
			t.Fatalf("after Proclaim(%s): %v (%q)", v, o, o.Leader.Value)
		}
	}
	if l, err := e.Leader(ctx); err != nil || string(l.Value) != "v3" {
		t.Fatalf("Leader: %q, %v", l.Value, err)
	}
	if err := e.Proclaim(ctx, make([]byte, zookeeper.MaxNodeData+1)); !errors.Is(err, recipe.ErrBadOption) && !errors.Is(err, recipe.ErrTooLarge) {
		t.Fatalf("Proclaim of a value too large: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release after Proclaim: %v", err)
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left %v", c)
	}
	if err := e.Proclaim(ctx, []byte("late")); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after Release: %v, want ErrNotLeader", err)
	}
}

// TestProclaimAfterNodeDeleted: the leader's node deleted by someone else,
// Proclaim fails (ErrNotLeader once the loss is seen, recipe.ErrLeaseLost
// or ErrNodeDeleted while it is being seen) and creates nothing.
func TestProclaimAfterNodeDeleted(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const dir = "/elect/proclaim-deleted"
	e := newElection(t, rtest.Connect(t, cl), dir)
	lease := campaign(t, e, "v1")
	for _, n := range in.Children(dir) {
		in.Delete(dir + "/" + n)
	}
	err := e.Proclaim(context.Background(), []byte("v2"))
	if !errors.Is(err, election.ErrNotLeader) && !errors.Is(err, recipe.ErrLeaseLost) && !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Proclaim after the node went: %v", err)
	}
	<-lease.Context().Done()
	if err := e.Proclaim(context.Background(), []byte("v2")); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim once the loss is seen: %v, want ErrNotLeader", err)
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left %v", c)
	}
}
