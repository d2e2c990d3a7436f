package barrier_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/barrier"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestDoubleFastLeaveRace: the classic race. The slow participant S has
// joined but reads nothing (its connection is blackholed) while the two
// fast ones see all three nodes, enter and call Leave. Their Leave must not
// delete their nodes before S has entered (S would then wait for ever, and
// they with it): S enters once its connection is back, then all leave.
func TestDoubleFastLeaveRace(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	slow := connectProxied(t, cl, zookeeper.WithSessionTimeout(20*time.Second))
	sd := newDouble(t, slow.s, "/race", 3)
	sEnter := async(func() error { return sd.Enter(opCtx(t)) })
	serverkit.Eventually(t, 10*time.Second, "S joined", func() bool { return len(nodes(in, "/race")) == 1 })
	slow.p.Blackhole()
	var fast []*barrier.DoubleBarrier
	var left []<-chan error
	for range 2 {
		fast = append(fast, newDouble(t, rtest.Connect(t, cl), "/race", 3))
	}
	entered := []<-chan error{async(func() error { return fast[0].Enter(opCtx(t)) }), async(func() error { return fast[1].Enter(opCtx(t)) })}
	for i, e := range entered {
		if err := await(t, e, "a fast Enter"); err != nil {
			t.Fatal(err)
		}
		left = append(left, async(func() error { return fast[i].Leave(opCtx(t)) }))
	}
	time.Sleep(200 * time.Millisecond) // let the Leaves look (either order passes)
	if got := nodes(in, "/race"); len(got) != 3 || marked(t, in, cl, "/race") != 2 {
		t.Fatalf("before S reads: nodes %q, %d marked; want 3, the fast two marked", got, marked(t, in, cl, "/race"))
	}
	stillBlocked(t, sEnter, "S's Enter")
	slow.p.Resume()
	if err := await(t, sEnter, "S's Enter"); err != nil {
		t.Fatalf("S's Enter: %v", err)
	}
	for _, l := range left {
		stillBlocked(t, l, "a fast Leave while S is in")
	}
	left = append(left, async(func() error { return sd.Leave(opCtx(t)) }))
	for _, l := range left {
		if err := await(t, l, "Leave"); err != nil {
			t.Fatal(err)
		}
	}
	noNodesLeft(t, in, "/race")
}

// TestDoubleCoveredByMark: A saw all three nodes and entered; X's Enter is
// then cancelled (its node deleted) before U read anything. U sees only A
// and itself, but A's mark names a point that held U's node: U enters
// (the server did hold three), and A's Leave waited for it.
func TestDoubleCoveredByMark(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	u, x := connectProxied(t, cl, zookeeper.WithSessionTimeout(20*time.Second)), connectProxied(t, cl, zookeeper.WithSessionTimeout(20*time.Second))
	ud, xd := newDouble(t, u.s, "/cover", 3), newDouble(t, x.s, "/cover", 3)
	uEnter := async(func() error { return ud.Enter(opCtx(t)) })
	xctx, xcancel := context.WithCancel(context.Background())
	defer xcancel()
	xEnter := async(func() error { return xd.Enter(xctx) })
	serverkit.Eventually(t, 10*time.Second, "U and X joined", func() bool { return len(nodes(in, "/cover")) == 2 })
	u.p.Blackhole()
	x.p.Blackhole()
	a := newDouble(t, rtest.Connect(t, cl), "/cover", 3)
	if err := a.Enter(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	aLeave := async(func() error { return a.Leave(opCtx(t)) })
	xcancel()
	x.p.Resume() // X's cleanup deletes its node
	if err := await(t, xEnter, "X's Enter"); !errors.Is(err, context.Canceled) {
		t.Fatalf("X's cancelled Enter: %v, want context.Canceled", err)
	}
	serverkit.Eventually(t, 20*time.Second, "X's node gone", func() bool { return len(nodes(in, "/cover")) == 2 })
	stillBlocked(t, aLeave, "A's Leave while U is unmarked")
	u.p.Resume()
	if err := await(t, uEnter, "U's Enter"); err != nil {
		t.Fatalf("U's Enter: %v", err)
	}
	if err := ud.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := await(t, aLeave, "A's Leave"); err != nil {
		t.Fatal(err)
	}
	noNodesLeft(t, in, "/cover")
}

// TestDoubleEnterFailuresLeaveNoNode: an Enter cancelled while it waits,
// one whose session expires, and one whose Session is closed each return
// their typed error and leave no node; the cancelled one may enter again.
func TestDoubleEnterFailuresLeaveNoNode(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	d := newDouble(t, s, "/fail", 5)
	ctx, cancel := context.WithCancel(context.Background())
	entering := async(func() error { return d.Enter(ctx) })
	serverkit.Eventually(t, 10*time.Second, "joined", func() bool { return len(nodes(in, "/fail")) == 1 })
	cancel()
	if err := await(t, entering, "cancelled Enter"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Enter: %v, want context.Canceled", err)
	}
	noNodesLeft(t, in, "/fail")

	c := connectProxied(t, cl, zookeeper.WithSessionTimeout(rtest.ConfTimeout))
	e := newDouble(t, c.s, "/fail", 5)
	expiring := async(func() error { return e.Enter(opCtx(t)) })
	serverkit.Eventually(t, 10*time.Second, "joined", func() bool { return len(nodes(in, "/fail")) == 1 })
	c.expire(t, cl)
	if err := await(t, expiring, "Enter in an expired session"); !errors.Is(err, recipe.ErrSessionLost) {
		t.Fatalf("Enter in an expired session: %v, want recipe.ErrSessionLost", err)
	}
	noNodesLeft(t, in, "/fail")

	closing := async(func() error { return d.Enter(opCtx(t)) }) // d may enter again
	serverkit.Eventually(t, 10*time.Second, "joined", func() bool { return len(nodes(in, "/fail")) == 1 })
	s.Close()
	if err := await(t, closing, "Enter on a closed Session"); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("Enter on a closed Session: %v, want recipe.ErrSessionClosed", err)
	}
	noNodesLeft(t, in, "/fail")
}

// TestDoubleLostCreateReply: the reply to the participant's create is lost
// (the connection cut right after the send): one node only, adopted by its
// GUID, and the participant enters and leaves with it.
func TestDoubleLostCreateReply(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var cuts atomic.Int32
	hook := zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if (op == zktest.OpCreate || op == zktest.OpCreate2) && cuts.Add(1) == 1 {
			return zktest.SendAndCut
		}
		return zktest.Pass
	})
	d := newDouble(t, rtest.Connect(t, cl, zookeeper.WithDialer(hook)), "/lost", 2)
	other := newDouble(t, rtest.Connect(t, cl), "/lost", 2)
	entering := async(func() error { return d.Enter(opCtx(t)) })
	serverkit.Eventually(t, 10*time.Second, "joined", func() bool { return len(nodes(in, "/lost")) >= 1 })
	if err := other.Enter(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := await(t, entering, "Enter"); err != nil {
		t.Fatalf("Enter after a lost create reply: %v", err)
	}
	if got := nodes(in, "/lost"); len(got) != 2 || cuts.Load() < 1 {
		t.Fatalf("nodes %q after %d creates, want 2 (one each)", got, cuts.Load())
	}
	leaving := async(func() error { return d.Leave(opCtx(t)) })
	if err := other.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := await(t, leaving, "Leave"); err != nil {
		t.Fatal(err)
	}
	noNodesLeft(t, in, "/lost")
}

// TestDoubleLeaveFailures: a Leave cancelled while another participant has
// not entered yet keeps its node (still entered: Leave again works), and a
// Leave after the session expired returns recipe.ErrSessionLost, left.
func TestDoubleLeaveFailures(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	b := connectProxied(t, cl, zookeeper.WithSessionTimeout(20*time.Second))
	bd := newDouble(t, b.s, "/leave", 2)
	bEnter := async(func() error { return bd.Enter(opCtx(t)) })
	serverkit.Eventually(t, 10*time.Second, "B joined", func() bool { return len(nodes(in, "/leave")) == 1 })
	b.p.Blackhole()
	a := newDouble(t, rtest.Connect(t, cl), "/leave", 2)
	if err := a.Enter(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := a.Leave(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leave while B is unmarked, short ctx: %v, want context.DeadlineExceeded", err)
	}
	if got := nodes(in, "/leave"); len(got) != 2 {
		t.Fatalf("nodes after the cancelled Leave: %q, want A's and B's", got)
	}
	if err := a.Enter(opCtx(t)); !errors.Is(err, barrier.ErrEntered) {
		t.Fatalf("Enter after a cancelled Leave: %v, want barrier.ErrEntered", err)
	}
	aLeave := async(func() error { return a.Leave(opCtx(t)) })
	b.p.Resume()
	if err := await(t, bEnter, "B's Enter"); err != nil {
		t.Fatal(err)
	}
	b.expire(t, cl)
	if err := bd.Leave(opCtx(t)); !errors.Is(err, recipe.ErrSessionLost) {
		t.Fatalf("Leave after the session expired: %v, want recipe.ErrSessionLost", err)
	}
	if err := bd.Leave(opCtx(t)); !errors.Is(err, barrier.ErrNotEntered) {
		t.Fatalf("Leave again: %v, want barrier.ErrNotEntered (it left)", err)
	}
	if err := await(t, aLeave, "A's Leave"); err != nil {
		t.Fatal(err)
	}
	noNodesLeft(t, in, "/leave")
}

// TestDoubleNodeDeletedByOperator: an entered participant whose node an
// operator deleted gets recipe.ErrNodeDeleted from Leave, and has left.
func TestDoubleNodeDeletedByOperator(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	d := newDouble(t, rtest.Connect(t, cl), "/operator", 1)
	if err := d.Enter(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, c := range nodes(in, "/operator") {
		in.Delete("/operator/" + c)
	}
	if err := d.Leave(opCtx(t)); !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Leave after the node's deletion: %v, want recipe.ErrNodeDeleted", err)
	}
	if err := d.Leave(opCtx(t)); !errors.Is(err, barrier.ErrNotEntered) {
		t.Fatalf("Leave again: %v, want barrier.ErrNotEntered (it left)", err)
	}
	if err := d.Enter(opCtx(t)); err != nil {
		t.Fatalf("Enter again: %v", err)
	}
	if err := d.Leave(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	noNodesLeft(t, in, "/operator")
}
