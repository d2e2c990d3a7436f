package latch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestSafetyOneLeaderAtATime: 5 participants on separate sessions; each, when
// it leads, checks its token at a shared fence.Guard and then closes (its
// session joins again with a new participant). A sampler counts, all along,
// the participants with IsLeader() true and the grants whose context is not
// done: never more than one. Tokens grow with every grant, and every one is
// accepted by the Guard.
func TestSafetyOneLeaderAtATime(t *testing.T) {
	cl := zktest.Shared(t)
	const slots, grants = 5, 30
	var (
		guard      fence.Guard
		mu         sync.Mutex
		tokens     []fence.Token
		holders    atomic.Int32
		overlaps   atomic.Int32
		violations atomic.Int32
		samples    atomic.Int64
		total      atomic.Int32
		cur        [slots]atomic.Pointer[latch.Latch]
		leases     [slots]atomic.Pointer[recipe.Lease]
		wg         sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the sampler
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			leaders, live := 0, 0
			for i := range slots {
				if l := cur[i].Load(); l != nil && l.IsLeader() {
					leaders++
				}
				if p := leases[i].Load(); p != nil && (*p).Context().Err() == nil {
					live++
				}
			}
			if leaders > 1 || live > 1 {
				violations.Add(1)
			}
			samples.Add(1)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	errs := make(chan error, 10*grants)
	for i := range slots {
		s := rtest.Connect(t, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; total.Load() < grants; n++ {
				l, err := latch.New(s, dir, fmt.Sprintf("p%d-%d", i, n))
				if err != nil {
					errs <- err
					return
				}
				cur[i].Store(l)
				if err := l.Start(ctx); err != nil {
					errs <- err
					return
				}
				lease, err := l.Await(ctx)
				if err != nil {
					errs <- fmt.Errorf("Await: %w", err)
					return
				}
				leases[i].Store(&lease)
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				tokens = append(tokens, lease.Token())
				mu.Unlock()
				if err := guard.Check("job", lease.Token()); err != nil {
					errs <- err
				}
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				total.Add(1)
				holders.Add(-1)
				if err := lease.Release(ctx); err != nil { // closes the latch
					errs <- fmt.Errorf("Release: %w", err)
					return
				}
				if l.IsLeader() {
					errs <- errors.New("IsLeader after Close")
				}
			}
			// Leave the election: the others may be waiting for this slot's
			// participant, which is closed; close any that is not.
			if l := cur[i].Load(); l != nil {
				l.Close(context.Background())
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d of %d samples saw more than one leader", v, samples.Load())
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping leaderships", overlaps.Load())
	}
	if len(tokens) < grants {
		t.Fatalf("%d grants, want at least %d", len(tokens), grants)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("grant %d has token %v, not above the previous %v", i, tokens[i], tokens[i-1])
		}
	}
	if samples.Load() < 100 {
		t.Fatalf("only %d samples: the sampler proved nothing", samples.Load())
	}
	in := zktest.Inspect(t, cl)
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("nodes left after every participant closed: %v", c)
	}
	t.Logf("%d grants, %d samples", len(tokens), samples.Load())
}

// TestParticipantsLeaderAndListen: Participants lists everyone in join order
// with its id; Leader names the first; a listener registered while leading
// gets the current grant first; the lease's token is the czxid of the
// leader's node; a follower's Await honours its context.
func TestParticipantsLeaderAndListen(t *testing.T) {
	cl := zktest.Shared(t)
	sa, sb := rtest.Connect(t, cl), rtest.Connect(t, cl)
	a := started(t, sa, "alpha")
	la := awaitLeader(t, a, 10*time.Second)
	b := started(t, sb, "beta")
	ps := participants(t, a)
	if len(ps) != 2 || string(ps[0].Data) != "alpha" || string(ps[1].Data) != "beta" ||
		ps[0].SessionID != sa.ID() || ps[1].SessionID != sb.ID() || ps[0].Kind != latch.Kind {
		t.Fatalf("participants %+v", ps)
	}
	if ps[0].Token != la.Token() {
		t.Fatalf("lease token %v, leader node's czxid %v", la.Token(), ps[0].Token)
	}
	if p, ok := la.(interface{ Path() string }); !ok || p.Path() != dir+"/"+ps[0].Name {
		t.Fatalf("lease path, want %s", dir+"/"+ps[0].Name)
	}
	ctx := context.Background()
	if p, err := b.Leader(ctx); err != nil || string(p.Data) != "alpha" || p.Name != ps[0].Name {
		t.Fatalf("Leader: %+v, %v", p, err)
	}
	if !a.IsLeader() || b.IsLeader() {
		t.Fatalf("IsLeader: a %v, b %v", a.IsLeader(), b.IsLeader())
	}
	if l2 := awaitLeader(t, a, time.Second); l2.Token() != la.Token() {
		t.Fatal("Await while leading returned another grant")
	}
	cctx, cancel := context.WithCancelCause(ctx)
	why := errors.New("caller gave up")
	time.AfterFunc(100*time.Millisecond, func() { cancel(why) })
	if _, err := b.Await(cctx); !errors.Is(err, why) {
		t.Fatalf("follower's Await: %v, want the context's cause", err)
	}
	ra, rb := record(t, a), record(t, b)
	serverkit.Eventually(t, 5*time.Second, "current state delivered to a's new listener", func() bool { return len(ra.Get()) == 1 })
	if c := ra.Get()[0]; !c.Leader || c.Token != la.Token() || c.Lease == nil || c.Lease.Token() != la.Token() {
		t.Fatalf("first change %+v", c)
	}
	closeLatch(t, a)
	if !errors.Is(context.Cause(la.Context()), recipe.ErrReleased) {
		t.Fatalf("cause after Close: %v", context.Cause(la.Context()))
	}
	lb := awaitLeader(t, b, 10*time.Second)
	if lb.Token() <= la.Token() {
		t.Fatalf("b's token %v not above a's %v", lb.Token(), la.Token())
	}
	if got := ra.waitClosed(t, 5*time.Second); leaderSeq(got) != "L-" || !errors.Is(got[1].Cause, latch.ErrClosed) {
		t.Fatalf("a's listener got %+v", got)
	}
	serverkit.Eventually(t, 5*time.Second, "b's listener told", func() bool { return leaderSeq(rb.Get()) == "L" })
	if p, err := b.Leader(ctx); err != nil || string(p.Data) != "beta" {
		t.Fatalf("Leader after a closed: %+v, %v", p, err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("Release of a grant ended by Close: %v", err)
	}
}

// TestLivenessAfterLeaderSessionExpires: the leader is partitioned past its
// session timeout. Its grant ends before a follower leads, with a larger
// token; once healed, the old leader joins again with a new node under a new
// session and follows. Its node of the old session is never taken for its
// own: one node per participant, owned by the current session.
func TestLivenessAfterLeaderSessionExpires(t *testing.T) {
	cl := zktest.Shared(t)
	p := newProxy(t)
	sa := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(2*time.Second))
	oldID := sa.ID()
	a := started(t, sa, "a")
	la := awaitLeader(t, a, 10*time.Second)
	oldNode := nodesOf(t, a, "a")[0]
	ra := record(t, a)
	aDone := rtest.WatchDone(la.Context())
	b := started(t, rtest.Connect(t, cl), "b")
	c := started(t, rtest.Connect(t, cl), "c")

	p.Blackhole()
	lb := awaitLeader(t, b, 20*time.Second)
	bAt := time.Now()
	if at := aDone.Get(); at.IsZero() || at.After(bAt) {
		t.Fatalf("a's grant ended at %v, b leads at %v", at, bAt)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("b's token %v not above a's %v", lb.Token(), la.Token())
	}
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrSuspended) && !errors.Is(cause, recipe.ErrSessionLost) {
		t.Fatalf("a's cause %v", cause)
	}
	if a.IsLeader() || c.IsLeader() {
		t.Fatal("a second leader")
	}
	p.Resume()
	serverkit.Eventually(t, 15*time.Second, "a re-joined under a new session", func() bool {
		ns := nodesOf(t, b, "a")
		return sa.ID() != oldID && len(ns) == 1 && ns[0].SessionID == sa.ID()
	})
	nn := nodesOf(t, b, "a")[0]
	if nn.Name == oldNode.Name || nn.Token <= lb.Token() {
		t.Fatalf("a's new node %+v; old %+v, b's token %v", nn, oldNode, lb.Token())
	}
	ps := participants(t, b)
	if len(ps) != 3 || string(ps[0].Data) != "b" || string(ps[1].Data) != "c" || string(ps[2].Data) != "a" {
		t.Fatalf("participants %+v, want b, c, a", ps)
	}
	if a.IsLeader() || !b.IsLeader() {
		t.Fatalf("after healing: a leader %v, b leader %v", a.IsLeader(), b.IsLeader())
	}
	serverkit.Eventually(t, 5*time.Second, "a's listener told", func() bool { return len(ra.Get()) >= 2 })
	if got := ra.Get(); leaderSeq(got) != "L-" || got[0].Token != la.Token() || got[1].Token != la.Token() {
		t.Fatalf("a's listener got %+v, want the current grant, then one 'not leader'", got)
	}
	// a is a live participant again: it leads once b and c leave.
	closeLatch(t, b)
	closeLatch(t, c)
	l := awaitLeader(t, a, 10*time.Second)
	// (Compared with a's node now: were a's new session presumed lost
	// meanwhile, say on a loaded machine, a would have re-joined again.)
	if now := nodesOf(t, a, "a"); len(now) != 1 || l.Token() != now[0].Token || l.Token() <= lb.Token() {
		t.Fatalf("a leads with token %v; its node %+v, b's token %v", l.Token(), now, lb.Token())
	}
}

// TestSuspensionKeepsNodeAndToken: a short cut (within the session timeout)
// ends the leader's grant at once (recipe.ErrSuspended, the default
// policy); nobody else leads while its session lives; after RECONNECTED it
// leads again with the same node and the same token (Curator's semantics),
// and its listener saw leader, not leader, leader.
func TestSuspensionKeepsNodeAndToken(t *testing.T) {
	cl := zktest.Shared(t)
	p := newProxy(t)
	sa := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(4*time.Second))
	id := sa.ID()
	a := started(t, sa, "a")
	ra := record(t, a)
	la := awaitLeader(t, a, 10*time.Second)
	b := started(t, rtest.Connect(t, cl), "b")
	rb := record(t, b)
	before := participants(t, b)
	var guard fence.Guard
	if err := guard.Check("job", la.Token()); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	if cause := waitDone(t, la.Context(), 3*time.Second, "a's grant"); !errors.Is(cause, recipe.ErrSuspended) {
		t.Fatalf("cause %v, want ErrSuspended", cause)
	}
	if a.IsLeader() {
		t.Fatal("IsLeader while suspended")
	}
	notLeaderFor(t, b, time.Second)
	p.Resume()
	la2 := awaitLeader(t, a, 10*time.Second)
	if sa.ID() != id {
		t.Fatal("the session changed: the test would prove nothing")
	}
	if la2.Token() != la.Token() {
		t.Fatalf("token after RECONNECTED %v, before %v", la2.Token(), la.Token())
	}
	if la2.Context().Err() != nil || !errors.Is(context.Cause(la.Context()), recipe.ErrSuspended) {
		t.Fatal("grant contexts mixed up")
	}
	if err := guard.Check("job", la2.Token()); err != nil {
		t.Fatalf("the guard refuses the re-grant: %v", err)
	}
	after := participants(t, b)
	if len(after) != 2 || after[0].Name != before[0].Name || after[1].Name != before[1].Name {
		t.Fatalf("nodes changed: before %+v, after %+v", before, after)
	}
	if b.IsLeader() {
		t.Fatal("b leads")
	}
	serverkit.Eventually(t, 5*time.Second, "a's listener saw L - L", func() bool { return leaderSeq(ra.Get()) == "L-L" })
	got := ra.Get()
	if !errors.Is(got[1].Cause, recipe.ErrSuspended) || got[1].Token != la.Token() || got[2].Token != la.Token() {
		t.Fatalf("a's changes %+v", got)
	}
	if len(rb.Get()) != 0 {
		t.Fatalf("b's listener got %+v", rb.Get())
	}
}

// countingSession connects through a RequestHook that counts the creates and
// deletes the session sends.
func countingSession(t *testing.T, cl *zktest.Cluster) (*zookeeper.Session, *atomic.Int32, *atomic.Int32) {
	var creates, deletes atomic.Int32
	s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
		switch op {
		case zktest.OpCreate, zktest.OpCreate2, zktest.OpMulti: // a queue node's create may go out as create2
			creates.Add(1)
		case zktest.OpDelete:
			deletes.Add(1)
		}
		return zktest.Pass
	})))
	return s, &creates, &deletes
}

// TestC11_PredecessorChurnKeepsNode: the participants between the leader and
// the last one vanish one after the other (closed, or their session
// closed), each time the last one's immediate predecessor. The last one
// re-evaluates every time but never deletes or re-creates its node (one
// create, no delete, same name throughout), and leads once the leader goes.
func TestC11_PredecessorChurnKeepsNode(t *testing.T) {
	cl := zktest.Shared(t)
	a := started(t, rtest.Connect(t, cl), "leader")
	awaitLeader(t, a, 10*time.Second)
	const middles = 6
	var ms []*latch.Latch
	var mss []*zookeeper.Session
	for i := range middles {
		s := rtest.Connect(t, cl)
		mss = append(mss, s)
		ms = append(ms, started(t, s, fmt.Sprintf("m%d", i)))
	}
	sc, creates, deletes := countingSession(t, cl)
	c := started(t, sc, "last")
	rc := record(t, c)
	node := nodesOf(t, a, "last")
	if len(node) != 1 {
		t.Fatalf("last's nodes %+v", node)
	}
	for i := middles - 1; i >= 0; i-- {
		if i%2 == 0 {
			closeLatch(t, ms[i])
		} else {
			mss[i].Close()
		}
		serverkit.Eventually(t, 10*time.Second, fmt.Sprintf("m%d gone", i), func() bool { return len(nodesOf(t, a, fmt.Sprintf("m%d", i))) == 0 })
		// New participants keep joining behind the last one.
		started(t, rtest.Connect(t, cl), fmt.Sprintf("late%d", i))
		if now := nodesOf(t, a, "last"); len(now) != 1 || now[0].Name != node[0].Name {
			t.Fatalf("last's node changed: %+v, was %s", now, node[0].Name)
		}
		if c.IsLeader() {
			t.Fatal("last leads while the leader lives")
		}
	}
	closeLatch(t, a)
	lc := awaitLeader(t, c, 10*time.Second)
	if lc.Token() != node[0].Token {
		t.Fatalf("last leads with token %v, its node's czxid %v", lc.Token(), node[0].Token)
	}
	if n, d := creates.Load(), deletes.Load(); n != 1 || d != 0 {
		t.Fatalf("last sent %d creates and %d deletes, want 1 and 0", n, d)
	}
	serverkit.Eventually(t, 5*time.Second, "last's listener told", func() bool { return leaderSeq(rc.Get()) == "L" })
}

// TestC12_CloseRacesTheLoop: Close runs while Start joins, while the
// participant waits on its predecessor's watch, and while it leads, at
// random moments. After each Close: no node of the participant (also a while
// later), Start and Await return ErrClosed, the listener got a final
// "not leader" (ErrClosed) and its channel was closed.
func TestC12_CloseRacesTheLoop(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	var holder *latch.Latch
	for i := range 40 {
		switch i {
		case 0:
			holder = started(t, rtest.Connect(t, cl), "holder") // the first half waits
		case 20:
			closeLatch(t, holder) // the second half may lead
		}
		id := fmt.Sprintf("p%d", i)
		l, err := latch.New(s, dir, id)
		if err != nil {
			t.Fatal(err)
		}
		r := record(t, l)
		startErr := make(chan error, 1)
		go func() { startErr <- l.Start(context.Background()) }()
		go l.Await(context.Background()) // exercises Await against Close
		time.Sleep(time.Duration(rand.IntN(15000)) * time.Microsecond)
		closeLatch(t, l)
		if n := nodesOf(t, l, id); len(n) != 0 {
			t.Fatalf("iteration %d: node %+v after Close", i, n)
		}
		if err := <-startErr; err != nil && !errors.Is(err, latch.ErrClosed) {
			t.Fatalf("iteration %d: Start: %v", i, err)
		}
		if err := l.Start(context.Background()); !errors.Is(err, latch.ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
		if _, err := l.Await(context.Background()); !errors.Is(err, latch.ErrClosed) {
			t.Fatalf("Await after Close: %v", err)
		}
		if l.IsLeader() {
			t.Fatal("IsLeader after Close")
		}
		got := r.waitClosed(t, 5*time.Second)
		if len(got) == 0 || got[len(got)-1].Leader || !errors.Is(got[len(got)-1].Cause, latch.ErrClosed) {
			t.Fatalf("iteration %d: listener got %+v, want a final not-leader", i, got)
		}
		if i < 20 && slices.ContainsFunc(got, func(c latch.Change) bool { return c.Leader }) {
			t.Fatalf("iteration %d led while the holder lived: %+v", i, got)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := in.Owned(dir, s.ID()); len(n) != 0 {
		t.Fatalf("nodes of closed participants: %v", n)
	}
}

// TestC12_CloseWhileCreateInFlight: Close is called while the create of
// Start is on its way to the server (variant: and its reply is lost with the
// connection). Close waits for it to land and be deleted: no node after
// Close returns (for the lost reply: once the Session's cleaner has run on
// reconnection, see Close), and no create is sent after Close returned.
func TestC12_CloseWhileCreateInFlight(t *testing.T) {
	for _, fault := range []zktest.Fault{zktest.Pass, zktest.SendAndCut} {
		t.Run(fault.String(), func(t *testing.T) {
			cl := zktest.Shared(t)
			in := zktest.Inspect(t, cl)
			in.Create(dir, nil)
			var (
				l                      atomic.Pointer[latch.Latch]
				armed, closedAt        atomic.Bool
				hits, createsAfter     atomic.Int32
				closeErr               = make(chan error, 1)
				closeCtx, cancelCloses = context.WithTimeout(context.Background(), 10*time.Second)
			)
			defer cancelCloses()
			s := rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, func(op int32) zktest.Fault {
				if op != zktest.OpCreate && op != zktest.OpCreate2 { // a queue node's create may go out as create2
					return zktest.Pass
				}
				if closedAt.Load() {
					createsAfter.Add(1)
				}
				if armed.CompareAndSwap(true, false) {
					hits.Add(1)
					go func() { closeErr <- l.Load().Close(closeCtx) }()
					time.Sleep(400 * time.Millisecond) // Close runs while the create waits, longer than the 250 ms Join waits for its own clean-up
					return fault
				}
				return zktest.Pass
			})))
			x, err := latch.New(s, dir, "x")
			if err != nil {
				t.Fatal(err)
			}
			l.Store(x)
			r := record(t, x)
			armed.Store(true)
			if err := x.Start(context.Background()); !errors.Is(err, latch.ErrClosed) {
				t.Fatalf("Start: %v, want ErrClosed", err)
			}
			if err := <-closeErr; err != nil {
				t.Fatalf("Close: %v", err)
			}
			closedAt.Store(true)
			if hits.Load() != 1 {
				t.Fatal("fault not injected")
			}
			if fault == zktest.Pass {
				// The create's reply came back: Close waited for it to land
				// and for its delete. Nothing appears in the directory after.
				n, _, ev, err := in.Conn().ChildrenW(cl.Chroot() + dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(n) != 0 {
					t.Fatalf("node %v right after Close", n)
				}
				select {
				case e := <-ev:
					t.Fatalf("the directory changed after Close returned: %+v, children now %v", e, in.Children(dir))
				case <-time.After(time.Second):
				}
			} else {
				// The reply was lost with the connection: the delete was
				// handed to the Session's cleaner, which runs on
				// reconnection (go-zookeeper redials after about 1 s).
				serverkit.Eventually(t, 10*time.Second, "reconnected, cleaner done, no node", func() bool {
					return s.State() == recipe.StateReconnected && zkside.SessionOf(s).PendingCleanup() == 0 && len(in.Children(dir)) == 0
				})
			}
			time.Sleep(300 * time.Millisecond)
			if n := in.Children(dir); len(n) != 0 {
				t.Fatalf("node %v after Close", n)
			}
			if n := createsAfter.Load(); n != 0 {
				t.Fatalf("%d creates after Close returned", n)
			}
			if got := r.waitClosed(t, 5*time.Second); leaderSeq(got) != "-" || !errors.Is(got[0].Cause, latch.ErrClosed) {
				t.Fatalf("listener got %+v", got)
			}
		})
	}
}

// TestC17_DirectoryDeletedUnderLiveParticipants: an operator deletes the
// election directory and every child (deleteall, through a raw connection)
// under three live participants. They re-create it and elect one leader,
// each with one new node whose token is above every earlier one.
func TestC17_DirectoryDeletedUnderLiveParticipants(t *testing.T) {
	cl := zktest.Shared(t)
	var ls []*latch.Latch
	var rs []*recorder
	for _, id := range []string{"a", "b", "c"} {
		l := started(t, rtest.Connect(t, cl), id)
		ls = append(ls, l)
		rs = append(rs, record(t, l))
	}
	la := awaitLeader(t, ls[0], 10*time.Second)
	old := participants(t, ls[0])
	var oldMax fence.Token
	for _, p := range old {
		oldMax = max(oldMax, p.Token)
	}
	ops := rtest.Connect(t, cl)
	conn, abs := ops.Conn(), zkside.SessionOf(ops).Chroot()+dir
	deleted := false
	for try := 0; try < 50 && !deleted; try++ {
		children, _, err := conn.Children(abs)
		if errors.Is(err, zk.ErrNoNode) && try == 0 {
			t.Fatal("directory missing before its deletion")
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		for _, c := range children {
			if err := conn.Delete(abs+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				t.Fatal(err)
			}
		}
		err = conn.Delete(abs, -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode): // (or reaped as an empty container)
			deleted = true
		case errors.Is(err, zk.ErrNotEmpty): // someone re-joined meanwhile: again
		default:
			t.Fatal(err)
		}
	}
	if !deleted {
		t.Fatal("could not delete the directory")
	}
	if cause := waitDone(t, la.Context(), 5*time.Second, "the leader's grant"); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Fatalf("leader's cause %v, want ErrNodeDeleted", cause)
	}
	var leader *latch.Latch
	serverkit.Eventually(t, 10*time.Second, "one leader elected", func() bool {
		n := 0
		for _, l := range ls {
			if l.IsLeader() {
				n, leader = n+1, l
			}
		}
		return n == 1 && len(participants(t, ls[0])) == 3
	})
	lease := awaitLeader(t, leader, time.Second)
	if lease.Token() <= oldMax {
		t.Fatalf("new leader's token %v not above %v", lease.Token(), oldMax)
	}
	ps := participants(t, ls[0])
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[string(p.Data)] || p.Token <= oldMax || slices.ContainsFunc(old, func(o zookeeper.Participant) bool { return o.Name == p.Name }) {
			t.Fatalf("participants after re-creation %+v (before %+v)", ps, old)
		}
		seen[string(p.Data)] = true
	}
	if string(ps[0].Data) != leader.ID() {
		t.Fatalf("first node %s, leader %s", ps[0].Data, leader.ID())
	}
	if got := rs[0].Get(); len(got) < 2 || leaderSeq(got[:2]) != "L-" || !errors.Is(got[1].Cause, recipe.ErrNodeDeleted) {
		t.Fatalf("a's listener got %+v", got)
	}
	closeLatch(t, leader)
	serverkit.Eventually(t, 10*time.Second, "the next one leads", func() bool {
		n := 0
		for _, l := range ls {
			if l.IsLeader() {
				n++
			}
		}
		return n == 1
	})
}

// TestStartCancelledAndCloseLeaveNothing: a Start whose context is done
// leaves no node and can be retried; Close of a leader and of a follower
// deletes their nodes; the grant ends with recipe.ErrReleased; a follower's
// Await returns ErrClosed when its latch is closed.
func TestStartCancelledAndCloseLeaveNothing(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	sa, sb := rtest.Connect(t, cl), rtest.Connect(t, cl)
	a := newLatch(t, sa, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a done context: %v", err)
	}
	if _, err := a.Await(context.Background()); !errors.Is(err, latch.ErrNotStarted) {
		t.Fatalf("Await after a failed Start: %v, want ErrNotStarted", err)
	}
	if n := in.Owned(dir, sa.ID()); len(n) != 0 {
		t.Fatalf("failed Start left %v", n)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	la := awaitLeader(t, a, 10*time.Second)
	b := started(t, sb, "b")
	waiting := make(chan error, 1)
	go func() { _, err := b.Await(context.Background()); waiting <- err }()
	serverkit.Eventually(t, 10*time.Second, "both joined", func() bool { return len(in.Children(dir)) == 2 })
	closeLatch(t, b)
	select {
	case err := <-waiting:
		if !errors.Is(err, latch.ErrClosed) {
			t.Fatalf("follower's Await after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follower's Await did not return at Close")
	}
	if n := in.Owned(dir, sb.ID()); len(n) != 0 {
		t.Fatalf("closed follower left %v", n)
	}
	if err := la.Release(context.Background()); err != nil { // = a.Close
		t.Fatalf("Release: %v", err)
	}
	if !errors.Is(context.Cause(la.Context()), recipe.ErrReleased) {
		t.Fatalf("cause %v", context.Cause(la.Context()))
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left %v", c)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Await(context.Background()); !errors.Is(err, latch.ErrClosed) {
		t.Fatalf("Await after Close: %v", err)
	}
}

// TestReleaseAfterLossReportsLeaseLost: Release of a grant that had already
// ended (its node deleted by an operator) returns recipe.ErrLeaseLost and
// closes the latch all the same.
func TestReleaseAfterLossReportsLeaseLost(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	a := started(t, s, "a")
	la := awaitLeader(t, a, 10*time.Second)
	node := in.Owned(dir, s.ID())[0]
	if err := in.Conn().Delete(cl.Chroot()+dir+"/"+node, -1); err != nil {
		t.Fatal(err)
	}
	if cause := waitDone(t, la.Context(), 5*time.Second, "grant"); !errors.Is(cause, recipe.ErrNodeDeleted) {
		t.Fatalf("cause %v", cause)
	}
	la2 := awaitLeader(t, a, 10*time.Second) // re-joined with a new node
	if la2.Token() <= la.Token() {
		t.Fatal("token did not grow")
	}
	if err := la.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Release of the lost grant: %v, want ErrLeaseLost", err)
	}
	if _, err := a.Await(context.Background()); !errors.Is(err, latch.ErrClosed) {
		t.Fatalf("Await: %v, want ErrClosed", err)
	}
	if !errors.Is(context.Cause(la2.Context()), recipe.ErrReleased) {
		t.Fatalf("current grant's cause: %v", context.Cause(la2.Context()))
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left %v", c)
	}
}

// TestClosedSession: closing the Session ends the latch: the grant ends
// with recipe.ErrSessionClosed, Await returns it, listeners get a final
// not-leader and are closed, Close returns nil; New and Start on a closed
// session return recipe.ErrSessionClosed.
func TestClosedSession(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	a := started(t, s, "a")
	la := awaitLeader(t, a, 10*time.Second)
	b := started(t, s, "b")
	idle := newLatch(t, s, "idle")
	ra, rb := record(t, a), record(t, b)
	s.Close()
	if !errors.Is(context.Cause(la.Context()), recipe.ErrSessionClosed) {
		t.Fatalf("grant cause %v", context.Cause(la.Context()))
	}
	for _, r := range []*recorder{ra, rb} {
		got := r.waitClosed(t, 5*time.Second)
		if len(got) == 0 || got[len(got)-1].Leader || !errors.Is(got[len(got)-1].Cause, recipe.ErrSessionClosed) {
			t.Fatalf("listener got %+v", got)
		}
	}
	for _, l := range []*latch.Latch{a, b} {
		if _, err := l.Await(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
			t.Fatalf("Await of %s: %v", l.ID(), err)
		}
		if l.IsLeader() {
			t.Fatal("leader after the session closed")
		}
		closeLatch(t, l)
	}
	if err := idle.Start(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("Start on a closed session: %v", err)
	}
	if _, err := latch.New(s, dir, "late"); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("New on a closed session: %v", err)
	}
}

// TestBadInput: invalid paths, a nil session and an id over the limit are
// refused by New; Start twice, Await before Start, Start after Close and
// Leader without participants give their typed errors.
func TestBadInput(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	for _, p := range []string{"", "election", "/", "/election/", "/a//b", "/zookeeper/x", "/a/../b"} {
		if _, err := latch.New(s, p, "x"); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q): %v, want ErrInvalidPath", p, err)
		}
	}
	if _, err := latch.New(nil, dir, "x"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("nil session: %v", err)
	}
	if _, err := latch.New(s, dir, string(make([]byte, zookeeper.MaxNodeData+1))); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("id over MaxNodeData: %v", err)
	}
	if _, err := latch.New(s, dir, string(make([]byte, zookeeper.MaxNodeData)), latch.WithLogger(nil)); err != nil {
		t.Errorf("id of MaxNodeData: %v", err)
	}
	l := newLatch(t, s, "x")
	if _, err := l.Await(context.Background()); !errors.Is(err, latch.ErrNotStarted) {
		t.Errorf("Await before Start: %v", err)
	}
	if _, err := l.Leader(context.Background()); !errors.Is(err, latch.ErrNoLeader) {
		t.Errorf("Leader of an empty election: %v", err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); !errors.Is(err, latch.ErrAlreadyStarted) {
		t.Errorf("Start twice: %v", err)
	}
	closeLatch(t, l)
	if err := l.Start(context.Background()); !errors.Is(err, latch.ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	if _, ok := <-l.Listen(context.Background()); ok {
		t.Error("Listen after Close delivered something")
	}
	never := newLatch(t, s, "never")
	closeLatch(t, never) // before Start
	if err := never.Start(context.Background()); !errors.Is(err, latch.ErrClosed) {
		t.Errorf("Start after an early Close: %v", err)
	}
}

// TestACLRefusal: a directory the session may not create children in makes
// Start fail with recipe.ErrNoPermission and leave nothing; Start can be
// tried again.
func TestACLRefusal(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create(dir, zk.WorldACL(zk.PermRead))
	l := newLatch(t, rtest.Connect(t, cl), "x")
	for range 2 {
		if err := l.Start(context.Background()); !errors.Is(err, recipe.ErrNoPermission) || !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("Start: %v, want ErrNoPermission", err)
		}
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("nodes %v", c)
	}
}

// TestC19_ListenerThatNeverReads: a listener nobody reads does not stall
// the latch, the Session or go-zookeeper's event delivery: across cuts the
// participant loses and regains leadership, the session reconnects, other
// operations on it proceed; the unread listener's queue holds every change,
// in order, when it is finally read.
func TestC19_ListenerThatNeverReads(t *testing.T) {
	cl := zktest.Shared(t)
	p := newProxy(t)
	s := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(4*time.Second))
	id := s.ID()
	a := started(t, s, "a")
	lctx, lcancel := context.WithCancel(context.Background())
	defer lcancel()
	unread := a.Listen(lctx)
	r := record(t, a)
	awaitLeader(t, a, 10*time.Second)
	const cuts = 2
	for i := range cuts {
		l := awaitLeader(t, a, 10*time.Second)
		p.Cut()
		waitDone(t, l.Context(), 3*time.Second, "grant at the cut")
		p.Resume()
		awaitLeader(t, a, 10*time.Second)
		// Other work on the session goes on.
		o := started(t, s, fmt.Sprintf("other%d", i))
		if ps := participants(t, o); len(ps) != 2 {
			t.Fatalf("participants %+v", ps)
		}
		closeLatch(t, o)
	}
	if s.ID() != id {
		t.Fatal("session changed")
	}
	want := "L" + "-L"
	for range cuts - 1 {
		want += "-L"
	}
	serverkit.Eventually(t, 5*time.Second, "the reading listener saw every change", func() bool { return leaderSeq(r.Get()) == want })
	var got []latch.Change
	for len(got) < len(want) {
		select {
		case c := <-unread:
			got = append(got, c)
		case <-time.After(5 * time.Second):
			t.Fatalf("the unread listener held %+v", got)
		}
	}
	read := r.Get()
	for i, c := range got {
		if c.Leader != read[i].Leader || c.Token != read[i].Token || !c.At.Equal(read[i].At) {
			t.Fatalf("change %d: unread listener %+v, reading listener %+v", i, c, read[i])
		}
	}
}

// TestCloseDuringPartition: the leader's network is cut (connection closed
// and redials refused, or blackholed). Close with no deadline returns once
// the session is lost (its node went with it) rather than waiting for a
// reconnection; Close with a short deadline returns ctx's error and still
// gives listeners their final "not leader" and closes their channels.
// After the partition heals, no node of the participant is left.
func TestCloseDuringPartition(t *testing.T) {
	for _, mode := range []string{"cut", "blackhole"} {
		for _, short := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/short=%v", mode, short), func(t *testing.T) {
				cl := zktest.Shared(t)
				in := zktest.Inspect(t, cl)
				p := newProxy(t)
				s := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(2*time.Second))
				l := started(t, s, "a")
				awaitLeader(t, l, 10*time.Second)
				rec := record(t, l)
				if mode == "cut" {
					p.Cut()
				} else {
					p.Blackhole()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if short {
					cancel()
					ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
				}
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- l.Close(ctx) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(20 * time.Second):
					p.Resume()
					<-done
					t.Fatal("Close did not return within 20 s of a partition (session timeout 2 s)")
				}
				if short && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Close with a 300 ms deadline: %v, want DeadlineExceeded", err)
				}
				if !short && err != nil {
					t.Fatalf("Close after the session was lost: %v, want nil (the node went with the session)", err)
				}
				got := rec.waitClosed(t, 5*time.Second)
				if last := got[len(got)-1]; last.Leader || !errors.Is(last.Cause, latch.ErrClosed) {
					t.Fatalf("final change %+v, want not leader with ErrClosed", last)
				}
				p.Resume()
				serverkit.Eventually(t, 15*time.Second, "no node left after the partition healed", func() bool {
					return len(in.Children(dir)) == 0
				})
			})
		}
	}
}

// TestStopsOnAnotherRecipesNodes (issue 14): a mutex holds the latch's
// directory. Leadership cannot be granted until someone changes the
// configuration, so the participant stops instead of waiting (and
// retrying) for ever: Await returns recipe.ErrMixedRecipes, listeners get
// a final Change with it, and the participant's node is deleted.
func TestStopsOnAnotherRecipesNodes(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := rtest.HoldMutex(ctx, t, cl, dir)
	retried := newPauseAt(waitFailed)
	close(retried.release)
	l := newLatch(t, rtest.Connect(t, cl), "p", latch.WithLogger(slog.New(retried)))
	changes := l.Listen(ctx)
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, 20*time.Second)
	defer acancel()
	if _, err := l.Await(actx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("Await: %v, want recipe.ErrMixedRecipes", err)
	}
	// Confirmed by a second wait, after one backoff.
	if n := retried.count(); n != 1 {
		t.Errorf("%d waits met the mutex's node and were retried before the participant stopped, want 1", n)
	}
	select {
	case c := <-changes:
		if c.Leader || !errors.Is(c.Cause, recipe.ErrMixedRecipes) {
			t.Fatalf("final change %+v, want not leader with recipe.ErrMixedRecipes", c)
		}
	case <-ctx.Done():
		t.Fatal("no final change")
	}
	serverkit.Eventually(t, 10*time.Second, "the participant's node deleted", func() bool {
		c := in.Children(dir)
		return len(c) == 1 && strings.Contains(c[0], mutex.Kind)
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitFailed is the warning of a participant whose wait for leadership
// failed and is retried after a backoff.
const waitFailed = "latch: waiting for leadership failed; retrying"

// TestOutlivesAStrayNode (issue 14): another recipe's node that is on the
// latch's path for a moment only (a lock taken there by mistake, and
// released) does not end the participant: the wait that meets it backs
// off, and the next one, which no longer does, leads. (A node that stays
// ends it at the second wait: TestStopsOnAnotherRecipesNodes.)
func TestOutlivesAStrayNode(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stray := rtest.HoldMutex(ctx, t, cl, dir)
	// The participant's loop is held in its warning about the first wait
	// until the stray node is gone.
	p := newPauseAt(waitFailed)
	l := newLatch(t, rtest.Connect(t, cl), "p", latch.WithLogger(slog.New(p)))
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	awaited := make(chan error, 1)
	go func() {
		_, err := l.Await(ctx)
		awaited <- err
	}()
	select {
	case <-p.met:
	case err := <-awaited:
		t.Fatalf("Await = %v before the first wait was retried", err)
	case <-ctx.Done():
		t.Fatal("no wait met the stray node")
	}
	if err := stray.Release(ctx); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	if err := <-awaited; err != nil {
		t.Fatalf("Await after the stray node went: %v, want leadership", err)
	}
}
