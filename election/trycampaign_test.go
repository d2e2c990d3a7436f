package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestTryCampaign: TryCampaign leads when nobody does, answers ErrLocked at
// once (leaving no node) while someone leads or waits ahead, refuses a
// second campaign on a leading Election, and leads again after a Resign.
func TestTryCampaign(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	a := newElection(t, rtest.Connect(t, cl), dir)
	la, err := a.TryCampaign(ctx, []byte("a"))
	if err != nil {
		t.Fatalf("TryCampaign on an empty election: %v", err)
	}
	if _, err := a.TryCampaign(ctx, []byte("a")); !errors.Is(err, election.ErrCampaigning) {
		t.Fatalf("second TryCampaign on a leading Election: %v, want ErrCampaigning", err)
	}

	bs := rtest.Connect(t, cl)
	b := newElection(t, bs, dir)
	start := time.Now()
	if _, err := b.TryCampaign(ctx, []byte("b")); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryCampaign while a leads: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("TryCampaign took %v: it must not wait", d)
	}
	serverkit.Eventually(t, 5*time.Second, "the refused candidate's node deleted", func() bool { return len(in.Owned(dir, bs.ID())) == 0 })

	// A waiting candidate ahead of b also refuses b: the rule is "first
	// node", not "no live leader".
	c := newElection(t, rtest.Connect(t, cl), dir)
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	ch := campaignAsync(cctx, c, "c")
	serverkit.Eventually(t, 5*time.Second, "c queued", func() bool { return len(in.Children(dir)) == 2 })
	resign(t, a)
	rc := rtest.Await(t, ch, 10*time.Second)
	if rc.Err != nil {
		t.Fatalf("c's Campaign after a resigned: %v", rc.Err)
	}
	if _, err := b.TryCampaign(ctx, []byte("b")); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryCampaign while c leads: %v, want ErrLocked", err)
	}
	if err := c.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryCampaign(ctx, []byte("b"))
	if err != nil {
		t.Fatalf("TryCampaign after everyone resigned: %v", err)
	}
	if lb.Token() <= rc.Lease.Token() || rc.Lease.Token() <= la.Token() {
		t.Fatalf("tokens a %v, c %v, b %v: want strictly increasing", la.Token(), rc.Lease.Token(), lb.Token())
	}
	if l, err := b.Leader(ctx); err != nil || string(l.Value) != "b" || l.Token != lb.Token() {
		t.Fatalf("Leader: %+v, %v; want b with token %v", l, err, lb.Token())
	}
	resign(t, b)
	if ch := in.Children(dir); len(ch) != 0 {
		t.Fatalf("left behind: %v", ch)
	}
}
