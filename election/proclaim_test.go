package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
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

// TestProclaimBetweenReadAndWatch: a Proclaim that lands between an
// observer's read of the leader's data and the request that sets its data
// watch is still delivered (the observer reads the node's version again
// once its watch is set).
func TestProclaimBetweenReadAndWatch(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	const dir = "/elect/proclaim-race"
	e := newElection(t, rtest.Connect(t, cl), dir)
	lease := campaign(t, e, "v1")
	defer lease.Release(context.Background())
	var getData atomic.Int32
	var armed atomic.Bool
	obsSession := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if armed.Load() && op == zktest.OpGetData && getData.Add(1) == 2 { // the watch's getData
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := e.Proclaim(ctx, []byte("v2")); err != nil {
				t.Errorf("Proclaim: %v", err)
			}
		}
		return zktest.Pass
	})))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	armed.Store(true)
	ch := newElection(t, obsSession, dir).ObserveHolder(ctx)
	seen := []string{}
	for st := range ch {
		if seen = append(seen, st.Holder.ID); st.Holder.ID == "v2" {
			return
		}
		if len(seen) > 1 {
			break
		}
	}
	t.Fatalf("observed %q, never v2", seen)
}

// TestProclaimSameValueNoRepeat: a Proclaim of the value already published
// changes nothing an observer sees: neither Observe nor ObserveHolder
// delivers the same state again.
func TestProclaimSameValueNoRepeat(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	const dir = "/elect/proclaim-same"
	e := newElection(t, rtest.Connect(t, cl), dir)
	lease := campaign(t, e, "v1")
	defer lease.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	oe := newElection(t, rtest.Connect(t, cl), dir)
	hs, obs := oe.ObserveHolder(ctx), oe.Observe(ctx)
	first, o1 := <-hs, <-obs
	if err := e.Proclaim(ctx, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := e.Proclaim(ctx, []byte("v2")); err != nil { // a change: it comes, and nothing before it
		t.Fatal(err)
	}
	if st := <-hs; st.Holder.ID != "v2" {
		t.Errorf("ObserveHolder: %v, then %v", first, st)
	}
	if o := <-obs; string(o.Leader.Value) != "v2" {
		t.Errorf("Observe: %v, then %v (%q)", o1, o, o.Leader.Value)
	}
}

// TestProclaimAfterCancelled: a Proclaim whose ctx ends after its write
// was sent (the write applies, the lease's version is not advanced), then
// another Proclaim of a new value: it is written, not refused as someone
// else's write.
func TestProclaimAfterCancelled(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	const dir = "/elect/proclaim-cancelled"
	var cancelSet atomic.Pointer[context.CancelFunc]
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		if c := cancelSet.Swap(nil); c != nil && op == zktest.OpSetData {
			(*c)()
		}
		return zktest.Pass
	})))
	e := newElection(t, s, dir)
	lease := campaign(t, e, "v1")
	defer lease.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancelSet.Store(&cancel)
	err := e.Proclaim(ctx, []byte("v2"))
	t.Logf("the cancelled Proclaim: %v", err)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := e.Proclaim(ctx2, []byte("v3")); err != nil {
		t.Fatalf("Proclaim after a cancelled one: %v", err)
	}
	if l, err := e.Leader(ctx2); err != nil || string(l.Value) != "v3" {
		t.Fatalf("Leader: %q, %v", l.Value, err)
	}
}

// TestProclaimCutOff: a leader cut off from the server (its connection
// blackholed) is told by Proclaim that its leadership ended as soon as its
// lease does, not once the connection is back.
func TestProclaimCutOff(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	s := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial))
	e := newElection(t, s, "/elect/proclaim-cut")
	lease := campaign(t, e, "v1")
	p.Blackhole()
	defer p.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	err := e.Proclaim(ctx, []byte("v2"))
	if !errors.Is(err, recipe.ErrLeaseLost) && !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim while cut off: %v, want ErrLeaseLost", err)
	}
	<-lease.Context().Done()
	if took := time.Since(begin); took > s.SessionTimeout()+5*time.Second {
		t.Fatalf("Proclaim returned %v after the cut: it waited for the connection", took)
	}
}
