package barrier_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/barrier"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestDoubleRefused: a count below 1, a bad path, a nil session, Leave
// before Enter and Enter twice are refused with typed errors, and lose
// nothing: the entered participant still leaves normally.
func TestDoubleRefused(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	for _, n := range []int{0, -1} {
		if _, err := barrier.NewDouble(s, "/d", n); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("NewDouble(n=%d): %v, want recipe.ErrBadOption", n, err)
		}
	}
	if _, err := barrier.NewDouble(s, "/d/", 2); !errors.Is(err, recipe.ErrInvalidPath) {
		t.Errorf("NewDouble(/d/): %v, want recipe.ErrInvalidPath", err)
	}
	if _, err := barrier.NewDouble(nil, "/d", 2); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewDouble(nil session): %v, want recipe.ErrBadOption", err)
	}
	if _, err := barrier.NewDouble(s, "/d", 2, barrier.WithData(make([]byte, zookeeper.MaxNodeData))); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("NewDouble(too much data): %v, want recipe.ErrTooLarge", err)
	}
	d := newDouble(t, s, "/d", 1, barrier.WithData([]byte("host-1")))
	if err := d.Leave(opCtx(t)); !errors.Is(err, barrier.ErrNotEntered) {
		t.Errorf("Leave before Enter: %v, want barrier.ErrNotEntered", err)
	}
	if in.Stat("/d") != nil {
		t.Error("refused calls made the directory")
	}
	if err := d.Enter(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.Enter(opCtx(t)); !errors.Is(err, barrier.ErrEntered) {
		t.Errorf("Enter twice: %v, want barrier.ErrEntered", err)
	}
	if got := nodes(in, "/d"); len(got) != 1 {
		t.Errorf("nodes after Enter twice: %q, want 1", got)
	}
	if err := d.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.Leave(opCtx(t)); !errors.Is(err, barrier.ErrNotEntered) {
		t.Errorf("Leave twice: %v, want barrier.ErrNotEntered", err)
	}
	noNodesLeft(t, in, "/d")

	// A second Enter or a Leave while an Enter waits, from other goroutines.
	w := newDouble(t, s, "/d", 2)
	ctx, cancel := context.WithCancel(context.Background())
	entering := async(func() error { return w.Enter(ctx) })
	serverkit.Eventually(t, 10*time.Second, "joined", func() bool { return len(nodes(in, "/d")) == 1 })
	if err := w.Enter(opCtx(t)); !errors.Is(err, barrier.ErrEntered) {
		t.Errorf("Enter while entering: %v, want barrier.ErrEntered", err)
	}
	if err := w.Leave(opCtx(t)); !errors.Is(err, barrier.ErrNotEntered) {
		t.Errorf("Leave while entering: %v, want barrier.ErrNotEntered", err)
	}
	cancel()
	if err := await(t, entering, "Enter"); !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled Enter: %v, want context.Canceled", err)
	}
	noNodesLeft(t, in, "/d")
}

// TestDoubleRounds: 3 participants on 3 Sessions enter together and leave
// together, twice in one directory (a second round after the first left);
// Leave returns only once all have left, and nothing is left.
func TestDoubleRounds(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const n = 3
	var ds []*barrier.DoubleBarrier
	for i := range n {
		ds = append(ds, newDouble(t, rtest.Connect(t, cl), "/rounds", n, barrier.WithData(fmt.Appendf(nil, "p%d", i))))
	}
	for round := range 2 {
		var entered []<-chan error
		for _, d := range ds[:n-1] {
			entered = append(entered, async(func() error { return d.Enter(opCtx(t)) }))
		}
		serverkit.Eventually(t, 10*time.Second, "2 nodes", func() bool { return len(nodes(in, "/rounds")) == n-1 })
		for _, e := range entered {
			stillBlocked(t, e, "Enter with 2 of 3")
		}
		entered = append(entered, async(func() error { return ds[n-1].Enter(opCtx(t)) }))
		for _, e := range entered {
			if err := await(t, e, "Enter"); err != nil {
				t.Fatalf("round %d: Enter: %v", round, err)
			}
		}
		var left []<-chan error
		for _, d := range ds[1:] {
			left = append(left, async(func() error { return d.Leave(opCtx(t)) }))
		}
		serverkit.Eventually(t, 10*time.Second, "2 left", func() bool { return len(nodes(in, "/rounds")) == 1 })
		for _, l := range left {
			stillBlocked(t, l, "Leave with one participant in")
		}
		left = append(left, async(func() error { return ds[0].Leave(opCtx(t)) }))
		for _, l := range left {
			if err := await(t, l, "Leave"); err != nil {
				t.Fatalf("round %d: Leave: %v", round, err)
			}
		}
		noNodesLeft(t, in, "/rounds")
	}
}

// TestDoubleCountMismatch: a participant made with another count than the
// oldest one waiting in the directory gets barrier.ErrCountMismatch and
// leaves no node; the waiting one neither counts it nor fails.
func TestDoubleCountMismatch(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := newDouble(t, rtest.Connect(t, cl), "/mismatch", 2)
	waiting := async(func() error { return first.Enter(ctx) })
	serverkit.Eventually(t, 10*time.Second, "joined", func() bool { return len(nodes(in, "/mismatch")) == 1 })
	other := newDouble(t, rtest.Connect(t, cl), "/mismatch", 3)
	if err := other.Enter(opCtx(t)); !errors.Is(err, barrier.ErrCountMismatch) {
		t.Fatalf("Enter with another count: %v, want barrier.ErrCountMismatch", err)
	}
	stillBlocked(t, waiting, "the first Enter")
	cancel()
	if err := await(t, waiting, "the first Enter"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the first Enter: %v, want context.Canceled", err)
	}
	noNodesLeft(t, in, "/mismatch")
}

// TestDoubleLoopOneDirectory: n participants, each looping Enter, Leave on
// one directory as fast as it can: a participant that starts the next
// round while another is still in its Leave must not hold that Leave (nor
// be held by it), so every round completes.
func TestDoubleLoopOneDirectory(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const n, rounds = 3, 4
	var done []<-chan error
	for range n {
		d := newDouble(t, rtest.Connect(t, cl), "/loop", n)
		done = append(done, async(func() error {
			for r := range rounds {
				if err := d.Enter(opCtx(t)); err != nil {
					return fmt.Errorf("round %d: Enter: %w", r, err)
				}
				if err := d.Leave(opCtx(t)); err != nil {
					return fmt.Errorf("round %d: Leave: %w", r, err)
				}
			}
			return nil
		}))
	}
	for _, ch := range done {
		if err := await(t, ch, "a participant's rounds"); err != nil {
			t.Fatal(err)
		}
	}
	noNodesLeft(t, in, "/loop")
}
