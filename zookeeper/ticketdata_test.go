package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestSetLeaseDataRefusesOtherLeases: SetLeaseData takes only a live lease
// of its own queue: nil, a lease of another queue (same Session) or of
// another Session is recipe.ErrBadOption, an ended one recipe.ErrLeaseLost;
// none writes anything. A lease of its own is written, and its Release
// still deletes the node.
func TestSetLeaseDataRefusesOtherLeases(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s, other := connect(t, cl.Servers()), connect(t, cl.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newQ := func(s *Session, dir string) *Queue {
		q, err := NewQueue(s, dir, []string{"t-"}, FirstHolds)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q, q2, q3 := newQ(s, "/setlease/a"), newQ(s, "/setlease/b"), newQ(other, "/setlease/a2")
	own, err := q.Acquire(ctx, "t-", []byte("v0"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := q2.Acquire(ctx, "t-", nil)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := q3.Acquire(ctx, "t-", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]recipe.Lease{"nil": nil, "another queue's": foreign, "another session's": remote} {
		if err := q.SetLeaseData(ctx, l, []byte("x")); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s lease: %v, want ErrBadOption", name, err)
		}
	}
	if err := q.SetLeaseData(ctx, own, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if h, err := q.Head(ctx); err != nil || string(h.Node.Data) != "v1" {
		t.Fatalf("head after the write: %q, %v", h.Node.Data, err)
	}
	for _, l := range []recipe.Lease{own, foreign, remote} {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if err := q.SetLeaseData(ctx, own, []byte("v2")); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Fatalf("a released lease: %v, want ErrLeaseLost", err)
	}
	for _, d := range []string{"/setlease/a", "/setlease/b", "/setlease/a2"} {
		if c := in.Children(d); len(c) != 0 {
			t.Fatalf("%s: left %v", d, c)
		}
	}
}
