package zookeeper

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestCreateGate: the gate of a protected create, alone. Closed with no
// create in flight it settles at once; with one in flight it waits for it
// (then settles) up to its budget or the Session's quit (then does not:
// late must undo what lands); no create enters once it is closed.
func TestCreateGate(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		var g createGate
		g.close(nil, time.Hour)
		if !g.settled() || g.enter() {
			t.Fatalf("settled %v; a create entered after close", g.settled())
		}
	})
	t.Run("in flight", func(t *testing.T) {
		var g createGate
		if !g.enter() {
			t.Fatal("an open gate refused a create")
		}
		closed := make(chan struct{})
		go func() { g.close(nil, time.Minute); close(closed) }()
		select {
		case <-closed:
			t.Fatal("close returned with a create in flight")
		case <-time.After(50 * time.Millisecond):
		}
		g.exit()
		<-closed
		if !g.settled() || g.enter() {
			t.Fatalf("settled %v after the create returned; a create entered after close", g.settled())
		}
	})
	t.Run("budget", func(t *testing.T) {
		var g createGate
		g.enter()
		start := time.Now()
		g.close(nil, 30*time.Millisecond)
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Fatalf("close returned after %v, before its budget", d)
		}
		g.exit()
		if g.settled() {
			t.Fatal("a create answered after the budget settled the gate: late would not undo it")
		}
	})
	t.Run("quit", func(t *testing.T) {
		var g createGate
		g.enter()
		quit := make(chan struct{})
		close(quit)
		g.close(quit, time.Hour)
		g.exit()
		if g.settled() {
			t.Fatal("settled after the Session quit with a create in flight")
		}
	})
}

// createOnceHooked connects a Session to cl whose first plain create once
// armed is given to fault, and returns it with a queue on dir, the arming
// and the number of creates written since.
func createOnceHooked(t *testing.T, cl *zktest.Cluster, dir string, fault func() zktest.Fault) (*Session, *Queue, *atomic.Bool, *atomic.Int32) {
	t.Helper()
	var armed atomic.Bool
	var creates atomic.Int32
	s := connect(t, cl.Servers(), WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if op != zktest.OpCreate || !armed.Load() {
			return zktest.Pass
		}
		if creates.Add(1) == 1 {
			return fault()
		}
		return zktest.Pass
	})))
	return s, newTestQueue(t, s, dir), &armed, &creates
}

// TestCreateLostReplyAdoptsByGUID (C2, C3): the create is applied but its
// reply is lost with the connection: after the reconnection the node is
// found by its GUID and adopted, and no second create is sent.
func TestCreateLostReplyAdoptsByGUID(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s, q, armed, creates := createOnceHooked(t, cl, "/lostreply", func() zktest.Fault { return zktest.SendAndCut })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	armed.Store(true)
	guid := newGUID()
	name, _, err := q.d.create(ctx, guid, "lock-", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Owned("/lostreply", s.ID()); len(got) != 1 || got[0] != name || !strings.Contains(name, guid) {
		t.Fatalf("created %q; the session owns %q", name, got)
	}
	if n := creates.Load(); n != 1 {
		t.Fatalf("%d creates written, want 1 (the lost one, adopted)", n)
	}
}

// TestCreateNotSentCreatesAgain: the create never reached the server (the
// connection was cut before it was written): the lookup by GUID finds
// nothing, and the create is sent again, once.
func TestCreateNotSentCreatesAgain(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s, q, armed, creates := createOnceHooked(t, cl, "/notsent", func() zktest.Fault { return zktest.DropAndCut })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	armed.Store(true)
	name, _, err := q.d.create(ctx, newGUID(), "lock-", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Owned("/notsent", s.ID()); len(got) != 1 || got[0] != name {
		t.Fatalf("created %q; the session owns %q", name, got)
	}
	if n := creates.Load(); n != 2 {
		t.Fatalf("%d creates written, want 2 (the dropped one, and one more)", n)
	}
}

// TestCreateAnsweredAfterCallerLeftIsUndone (C4, C5): the caller stops
// waiting while its create is in flight, and the create is answered only
// later: the caller searches by GUID as join does, and whichever comes
// first, the create's answer (then late deletes the node) or the search
// after it, no node is left once Drain returns.
func TestCreateAnsweredAfterCallerLeftIsUndone(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cctx, leave := context.WithCancel(ctx)
	s, q, armed, _ := createOnceHooked(t, cl, "/leftcreate", func() zktest.Fault {
		leave()
		time.Sleep(abandonBudget + 100*time.Millisecond) // the caller's wait for it runs out
		return zktest.Pass
	})
	armed.Store(true)
	guid := newGUID()
	if _, maybe, err := q.d.create(cctx, guid, "lock-", nil, nil, nil); !errors.Is(err, context.Canceled) || !maybe {
		t.Fatalf("create after the caller left: %v (maybe %v), want context.Canceled and maybe", err, maybe)
	}
	q.d.deleteOwned(cctx, cleanupItem{dir: q.d.adir, guid: guid, owner: s.ID(), sends: lostSends{size: q.d.reqSize}}, false)
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := in.Owned("/leftcreate", s.ID()); len(got) != 0 {
		t.Fatalf("node left behind: %q", got)
	}
}
