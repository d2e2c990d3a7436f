package barrier_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestLeaveIgnoresTheNextRound: n=3 with four workers. A, B and X enter;
// A and B leave (they wait for X); Y joins for the next round before X
// leaves. X's Leave neither waits for Y (which waits for two more) nor do
// A's and B's: all three return; Y is left waiting for its round, and its
// cancelled Enter leaves no node.
func TestLeaveIgnoresTheNextRound(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const dir = "/barrier/next-round"
	a := newDouble(t, rtest.Connect(t, cl), dir, 3)
	b := newDouble(t, rtest.Connect(t, cl), dir, 3)
	x := newDouble(t, rtest.Connect(t, cl), dir, 3)
	y := newDouble(t, rtest.Connect(t, cl), dir, 3)
	ea, eb, ex := async(func() error { return a.Enter(opCtx(t)) }), async(func() error { return b.Enter(opCtx(t)) }), async(func() error { return x.Enter(opCtx(t)) })
	for _, ch := range []<-chan error{ea, eb, ex} {
		if err := await(t, ch, "Enter"); err != nil {
			t.Fatal(err)
		}
	}
	la, lb := async(func() error { return a.Leave(opCtx(t)) }), async(func() error { return b.Leave(opCtx(t)) })
	serverkit.Eventually(t, 10*time.Second, "A and B deleted", func() bool { return len(nodes(in, dir)) == 1 })
	yctx, ycancel := context.WithCancel(context.Background())
	defer ycancel()
	ey := async(func() error { return y.Enter(yctx) })
	serverkit.Eventually(t, 10*time.Second, "Y joined", func() bool { return len(nodes(in, dir)) == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := x.Leave(ctx); err != nil {
		t.Fatalf("X's Leave: %v (held by Y, which joined after the round entered)", err)
	}
	for _, ch := range []<-chan error{la, lb} {
		if err := await(t, ch, "A's or B's Leave"); err != nil {
			t.Errorf("Leave: %v", err)
		}
	}
	ycancel()
	if err := await(t, ey, "Y's Enter"); err == nil {
		t.Error("Y entered alone")
	}
	serverkit.Eventually(t, 10*time.Second, "no node left", func() bool { return len(nodes(in, dir)) == 0 })
}

// TestForgedNodesIgnored: persistent nodes named like participants, one
// with a forged mark far ahead and one never marked, neither let a lone
// participant enter nor hold the others' Leave.
func TestForgedNodesIgnored(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const dir = "/barrier/forged"
	a := newDouble(t, rtest.Connect(t, cl), dir, 2)
	b := newDouble(t, rtest.Connect(t, cl), dir, 2)
	ea := async(func() error { return a.Enter(opCtx(t)) }) // makes the directory
	serverkit.Eventually(t, 10*time.Second, "A joined", func() bool { return len(nodes(in, dir)) == 1 })
	for i, data := range []string{"2 9223372036854775807\n", "2 0\n"} {
		name := cl.Chroot() + dir + "/_c_" + "0123456789abcdef0123456789abcdef"[:31] + string(rune('a'+i)) + "-barrier-0000009990"
		if _, err := in.Conn().Create(name, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		defer in.Conn().Delete(name, -1)
	}
	select {
	case err := <-ea:
		t.Fatalf("A entered alone beside forged nodes: %v", err)
	case <-time.After(time.Second):
	}
	if err := b.Enter(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := await(t, ea, "A's Enter"); err != nil {
		t.Fatal(err)
	}
	lb := async(func() error { return b.Leave(opCtx(t)) })
	if err := a.Leave(opCtx(t)); err != nil {
		t.Fatalf("A's Leave beside a forged unmarked node: %v", err)
	}
	if err := await(t, lb, "B's Leave"); err != nil {
		t.Fatal(err)
	}
}
