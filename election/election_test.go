package election_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

const dir = "/election/svc"

// TestSafetyUnderChurn: 5 candidates on separate sessions run election.Run;
// leaders give up after a random time (some with an error). Never two leader
// functions at once; every leader's fenced write is accepted (no token ever
// goes down); the leader's token as sampled by Leader never goes down;
// nothing is left behind.
func TestSafetyUnderChurn(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const candidates, terms = 5, 30
	var (
		active, overlaps, stale atomic.Int32
		ended                   atomic.Int32
		guard                   fence.Guard
		mu                      sync.Mutex
		accepted                []fence.Token
		leaders                 = map[string]int{}
	)
	enough := make(chan struct{})
	var once sync.Once
	fnFor := func(name string) func(context.Context, fence.Token) error {
		return func(ctx context.Context, token fence.Token) error {
			if active.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer active.Add(-1)
			if err := guard.Do("resource", token, func() error {
				mu.Lock()
				accepted = append(accepted, token)
				leaders[name]++
				mu.Unlock()
				return nil
			}); err != nil {
				stale.Add(1)
				return err
			}
			select {
			case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if ended.Add(1) == terms {
				once.Do(func() { close(enough) })
			}
			if rand.IntN(4) == 0 {
				return errors.New("random failure")
			}
			return nil
		}
	}
	var runners []*runner
	for i := 0; i < candidates; i++ {
		name := fmt.Sprintf("c%d", i)
		runners = append(runners, startRun(newElection(t, rtest.Connect(t, cl), dir), name, fnFor(name)))
	}

	// Sample the leader as every observer sees it: its token never goes
	// down (the head of the queue only moves to later nodes).
	sampler := newElection(t, rtest.Connect(t, cl), dir)
	sctx, scancel := context.WithCancel(context.Background())
	sampled := make(chan error, 1)
	go func() {
		var last fence.Token
		n := 0
		for sctx.Err() == nil {
			if active.Load() > 1 {
				sampled <- fmt.Errorf("%d leader functions active", active.Load())
				return
			}
			l, err := sampler.Leader(sctx)
			if err == nil {
				if l.Token < last {
					sampled <- fmt.Errorf("leader token went down: %v after %v", l.Token, last)
					return
				}
				last = l.Token
				n++
				time.Sleep(5 * time.Millisecond)
			} else if !errors.Is(err, election.ErrNoLeader) && sctx.Err() == nil {
				sampled <- err
				return
			}
		}
		if n == 0 {
			sampled <- errors.New("the sampler never saw a leader")
			return
		}
		sampled <- nil
	}()

	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d leadership terms in 60 s", ended.Load())
	}
	for _, r := range runners {
		if err := r.stop(t, 10*time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
	}
	scancel()
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	if overlaps.Load() != 0 || stale.Load() != 0 {
		t.Fatalf("%d overlapping leaders, %d stale writes", overlaps.Load(), stale.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(accepted); i++ {
		if accepted[i] <= accepted[i-1] {
			t.Fatalf("leader %d's token %v not greater than the previous leader's %v", i, accepted[i], accepted[i-1])
		}
	}
	if len(leaders) < 2 {
		t.Fatalf("leaders %v: no churn", leaders)
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left behind: %v", c)
	}
	t.Logf("%d terms, by candidate %v", len(accepted), leaders)
}

// term records one run of a leader function.
type term struct {
	who        string
	token      fence.Token
	start, end time.Time
	cause      error
}

type termLog struct {
	mu    sync.Mutex
	terms []*term
}

// fn returns a leader function that leads until its context ends.
func (l *termLog) fn(who string) func(context.Context, fence.Token) error {
	return func(ctx context.Context, token fence.Token) error {
		tm := &term{who: who, token: token, start: time.Now()}
		l.mu.Lock()
		l.terms = append(l.terms, tm)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		tm.end, tm.cause = time.Now(), context.Cause(ctx)
		l.mu.Unlock()
		return nil
	}
}

// last returns a copy of who's latest term (ok false if none).
func (l *termLog) last(who string) (term, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.terms) - 1; i >= 0; i-- {
		if l.terms[i].who == who {
			return *l.terms[i], true
		}
	}
	return term{}, false
}

// byToken returns a copy of the term led with token.
func (l *termLog) byToken(token fence.Token) (term, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tm := range l.terms {
		if tm.token == token {
			return *tm, true
		}
	}
	return term{}, false
}

func (l *termLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.terms)
}

// TestFailoverLeaderCutOff: three candidates; the leader's network is cut
// past its session timeout. Its leader function's context ends (cause
// ErrSuspended or ErrSessionLost) before the next candidate's function
// starts; the new leader's token is larger; an observer on another session
// saw the change; the cut-off candidate joins again once the network is back.
func TestFailoverLeaderCutOff(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const timeout = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := newElection(t, rtest.Connect(t, cl), dir).Observe(ctx)
	if o := next(t, obs, 5*time.Second); o.Present {
		t.Fatalf("first observation %v, want no leader", o)
	}
	var log termLog
	p := serverkit.NewFaultProxy()
	defer p.Close()
	as := rtest.Connect(t, cl, zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(timeout))
	ra := startRun(newElection(t, as, dir), "a", log.fn("a"))
	o := next(t, obs, 10*time.Second)
	if !o.Present || string(o.Leader.Value) != "a" {
		t.Fatalf("observed %v (value %q), want a leading", o, o.Leader.Value)
	}
	rb := startRun(newElection(t, rtest.Connect(t, cl), dir), "b", log.fn("b"))
	serverkit.Eventually(t, 10*time.Second, "b queued", func() bool { return len(in.Children(dir)) == 2 })
	rc := startRun(newElection(t, rtest.Connect(t, cl), dir), "c", log.fn("c"))
	serverkit.Eventually(t, 10*time.Second, "c queued", func() bool { return len(in.Children(dir)) == 3 })
	ta, ok := log.last("a")
	if !ok || ta.token != o.Leader.Token {
		t.Fatalf("a's term %+v, observed token %v", ta, o.Leader.Token)
	}

	p.Blackhole()
	o = next(t, obs, 15*time.Second)
	if !o.Present || string(o.Leader.Value) != "b" {
		t.Fatalf("observed %v (value %q) after the cut, want b leading", o, o.Leader.Value)
	}
	if o.Leader.Token <= ta.token {
		t.Fatalf("new leader's token %v not larger than the cut-off leader's %v", o.Leader.Token, ta.token)
	}
	var tb term
	serverkit.Eventually(t, 5*time.Second, "b's leader function started", func() bool { tb, ok = log.last("b"); return ok })
	ta, _ = log.last("a")
	if ta.end.IsZero() || !ta.end.Before(tb.start) {
		t.Fatalf("a's leader function ended at %v, b's started at %v", ta.end, tb.start)
	}
	if !errors.Is(ta.cause, recipe.ErrSuspended) && !errors.Is(ta.cause, recipe.ErrSessionLost) {
		t.Fatalf("a's leadership ended with %v, want ErrSuspended or ErrSessionLost", ta.cause)
	}
	if tb.token != o.Leader.Token {
		t.Fatalf("b leads with %v, observed %v", tb.token, o.Leader.Token)
	}
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	defer lcancel()
	if l, err := newElection(t, rtest.Connect(t, cl), dir).Leader(lctx); err != nil || l.Token != tb.token {
		t.Fatalf("Leader: %+v, %v; want b's token %v", l, err, tb.token)
	}

	p.Resume()
	serverkit.Eventually(t, 15*time.Second, "a campaigns again on a new session", func() bool {
		return as.State().IsConnected() && len(in.Owned(dir, as.ID())) == 1
	})
	for _, r := range []*runner{ra, rb, rc} {
		if err := r.stop(t, 10*time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left behind: %v", c)
	}
}

// TestC16_ObserveReportsNoLeaderAndLatest: an observer on another session
// sees the no-leader state whenever the leader resigns with nobody waiting,
// and the next leader after it. A slow observer that does not read while 5
// leaders come and go is given the latest state only: nothing when that is
// the "no leader" it already has (never a stale leader), the last leader
// when the churn ends on one; then nothing until the next change. The
// directory is persistent here, so no container clean-up hides a stale
// state. The channel is closed when ctx ends.
func TestC16_ObserveReportsNoLeaderAndLatest(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create(dir, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	os := rtest.Connect(t, cl)
	obs := newElection(t, os, dir).Observe(ctx)
	const d = 5 * time.Second
	if o := next(t, obs, d); o.Present {
		t.Fatalf("first observation %v, want no leader", o)
	}
	// ref reads all the time, on the same session (the two share the
	// session's watches): once it has seen the final state of a churn, the
	// slow observer has had the same events.
	var refMu sync.Mutex
	var refLast election.Observation
	refCh := newElection(t, os, dir).Observe(ctx)
	go func() {
		for o := range refCh {
			refMu.Lock()
			refLast = o
			refMu.Unlock()
		}
	}()
	settled := func(want election.Observation) {
		t.Helper()
		serverkit.Eventually(t, 10*time.Second, "the reference observer saw "+want.String(), func() bool {
			refMu.Lock()
			defer refMu.Unlock()
			return refLast.Present == want.Present && refLast.Leader.Node == want.Leader.Node
		})
		time.Sleep(300 * time.Millisecond)
	}
	a := newElection(t, rtest.Connect(t, cl), dir)
	la := campaign(t, a, "a")
	if o := next(t, obs, d); !o.Present || o.Leader.Token != la.Token() || string(o.Leader.Value) != "a" {
		t.Fatalf("observed %v, want a with token %v", o, la.Token())
	}
	resign(t, a)
	if o := next(t, obs, d); o.Present {
		t.Fatalf("observed %v after the leader resigned, want no leader", o)
	}
	lb := campaign(t, a, "b")
	if o := next(t, obs, d); !o.Present || o.Leader.Token != lb.Token() {
		t.Fatalf("observed %v, want b with token %v", o, lb.Token())
	}
	resign(t, a)
	if o := next(t, obs, d); o.Present {
		t.Fatalf("observed %v after the leader resigned, want no leader", o)
	}

	// Slow: 5 leaders come and go; the latest state is "no leader".
	churn := func(n int, keepLast bool) recipe.Lease {
		var l recipe.Lease
		for i := 0; i < n; i++ {
			l = campaign(t, a, fmt.Sprintf("x%d", i))
			time.Sleep(50 * time.Millisecond) // for the observer to read it
			if i < n-1 || !keepLast {
				resign(t, a)
			}
		}
		want := election.Observation{}
		if keepLast {
			want.Present = true
			want.Leader.Node = path.Base(l.(interface{ Path() string }).Path())
		}
		settled(want)
		return l
	}
	// The reader already has the latest state ("no leader"): the terms it
	// missed are coalesced away, and no stale leader may be delivered.
	churn(5, false)
	nothingWithin(t, obs, 300*time.Millisecond)

	// Slow again, ending on a leader.
	last := churn(5, true)
	if o := next(t, obs, d); !o.Present || o.Leader.Token != last.Token() || string(o.Leader.Value) != "x4" {
		t.Fatalf("slow observer read %v first, want the latest leader x4 (token %v)", o, last.Token())
	}
	nothingWithin(t, obs, 300*time.Millisecond)

	// And the next change after that.
	resign(t, a)
	if o := next(t, obs, d); o.Present {
		t.Fatalf("observed %v after the leader resigned, want no leader", o)
	}
	cancel()
	select {
	case o, ok := <-obs:
		if ok {
			t.Fatalf("observation %v after ctx ended", o)
		}
	case <-time.After(d):
		t.Fatal("channel not closed after ctx ended")
	}
}

// TestC17_DirectoryDeletedUnderLiveParticipants: the election directory is
// deleted with all its children (in one transaction) under three Run
// participants and a plain Campaign waiter, twice. The leader's function
// ends with ErrNodeDeleted, the waiter's Campaign returns ErrNodeDeleted
// (nobody hangs on NoNode), the participants re-create the directory and
// elect a leader with a larger token, which the observer sees.
func TestC17_DirectoryDeletedUnderLiveParticipants(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := newElection(t, rtest.Connect(t, cl), dir).Observe(ctx)
	var log termLog
	var runners []*runner
	for _, name := range []string{"a", "b", "c"} {
		runners = append(runners, startRun(newElection(t, rtest.Connect(t, cl), dir), name, log.fn(name)))
	}
	// waitLeader reads observations until one shows a leader with a token
	// above min.
	waitLeader := func(min fence.Token) election.Observation {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			o := next(t, obs, time.Until(deadline))
			if o.Present && o.Leader.Token > min {
				return o
			}
		}
	}
	o := waitLeader(0)
	w := newElection(t, rtest.Connect(t, cl), dir)
	for round := 0; round < 2; round++ {
		waiter := campaignAsync(ctx, w, "w")
		serverkit.Eventually(t, 10*time.Second, "everyone queued", func() bool { return len(in.Children(dir)) == 4 })
		// The observer can see the leader before its function has started
		// and logged the term.
		var old term
		serverkit.Eventually(t, 10*time.Second, "the observed leader's term logged", func() bool {
			var ok bool
			old, ok = log.byToken(o.Leader.Token)
			return ok
		})
		if old.who != string(o.Leader.Value) {
			t.Fatalf("round %d: leader term %+v, observed %v", round, old, o)
		}
		if n := in.DeleteAll(dir); n != 4 {
			t.Fatalf("round %d: deleted %d children, want 4", round, n)
		}
		if r := rtest.Await(t, waiter, 5*time.Second); !errors.Is(r.Err, recipe.ErrNodeDeleted) {
			t.Fatalf("round %d: waiting Campaign returned %v, want ErrNodeDeleted", round, r.Err)
		}
		o = waitLeader(o.Leader.Token)
		serverkit.Eventually(t, 5*time.Second, "old leader's function ended", func() bool {
			old, _ = log.byToken(old.token)
			return !old.end.IsZero()
		})
		if !errors.Is(old.cause, recipe.ErrNodeDeleted) {
			t.Fatalf("round %d: old leader's function ended with %v, want ErrNodeDeleted", round, old.cause)
		}
		serverkit.Eventually(t, 10*time.Second, "new leader's function running", func() bool {
			tm, ok := log.byToken(o.Leader.Token)
			return ok && tm.end.IsZero()
		})
		l, err := w.Leader(ctx)
		if err != nil || l.Token != o.Leader.Token {
			t.Fatalf("round %d: Leader %+v, %v; observed %v", round, l, err, o)
		}
	}
	serverkit.Eventually(t, 10*time.Second, "all three candidates back", func() bool { return len(in.Children(dir)) == 3 })
	for _, r := range runners {
		if err := r.stop(t, 10*time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left behind: %v", c)
	}
	if n := log.count(); n < 3 {
		t.Fatalf("%d leadership terms, want at least 3", n)
	}
}

// TestC5_CancelledCampaignLeavesNothing: a Campaign whose deadline passes
// (or that is cancelled) behind a leader leaves no node, at once; when the
// leader resigns nothing is left and a third candidate leads at once.
func TestC5_CancelledCampaignLeavesNothing(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	a := newElection(t, rtest.Connect(t, cl), dir)
	campaign(t, a, "a")
	bs := rtest.Connect(t, cl)
	b := newElection(t, bs, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := b.Campaign(ctx, []byte("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign past its deadline: %v, want DeadlineExceeded", err)
	}
	// Campaign waits up to 250 ms for the delete; on a loaded machine the
	// session's cleaner may finish it just after.
	noneOwned := func() bool { return len(in.Owned(dir, bs.ID())) == 0 }
	serverkit.Eventually(t, 5*time.Second, "the expired Campaign's node deleted", noneOwned)
	cctx, ccancel := context.WithCancel(context.Background())
	ch := campaignAsync(cctx, b, "b")
	serverkit.Eventually(t, 10*time.Second, "b queued", func() bool { return len(in.Owned(dir, bs.ID())) == 1 })
	ccancel()
	if r := rtest.Await(t, ch, 5*time.Second); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Campaign: %v, want Canceled", r.Err)
	}
	serverkit.Eventually(t, 5*time.Second, "the cancelled Campaign's node deleted", noneOwned)
	p, err := a.Participants(context.Background())
	if err != nil || len(p) != 1 || string(p[0].Data) != "a" {
		t.Fatalf("participants %+v, %v; want only a", p, err)
	}
	resign(t, a)
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left after Resign: %v", c)
	}
	c := newElection(t, rtest.Connect(t, cl), dir)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := c.Campaign(ctx2, nil); err != nil {
		t.Fatalf("a third candidate could not lead: %v", err)
	}
	resign(t, c)
}

// TestLeaderAndResign: Leader reports ErrNoLeader on a missing and on an
// empty directory, and the leader's value, token, session and node while
// one leads; Resign ends the lease (ErrReleased), leaves nothing, is a no-op
// when not leading, and Campaign works again after it with a larger token.
func TestLeaderAndResign(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	e := newElection(t, s, dir)
	ctx := context.Background()
	if _, err := e.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader on a missing directory: %v, want ErrNoLeader", err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign without a campaign: %v", err)
	}
	in.Create(dir, nil)
	if _, err := e.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader on an empty directory: %v, want ErrNoLeader", err)
	}
	before := time.Now().Add(-time.Second)
	l := campaign(t, e, "host-1")
	if e.Path() != dir {
		t.Fatalf("Path %q", e.Path())
	}
	ld, err := newElection(t, rtest.Connect(t, cl), dir).Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := l.(interface{ Path() string }).Path()
	if string(ld.Value) != "host-1" || ld.Token != l.Token() || ld.SessionID != s.ID() || dir+"/"+ld.Node != node ||
		ld.Created.Before(before) || ld.Created.After(time.Now().Add(time.Second)) {
		t.Fatalf("Leader %+v; lease token %v node %s session %x", ld, l.Token(), node, s.ID())
	}
	resign(t, e)
	if !errors.Is(context.Cause(l.Context()), recipe.ErrReleased) {
		t.Fatalf("lease cause after Resign: %v", context.Cause(l.Context()))
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left after Resign: %v", c)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after Resign: %v, want ErrNoLeader", err)
	}
	resign(t, e) // a no-op now
	l2 := campaign(t, e, "host-1")
	if l2.Token() <= l.Token() {
		t.Fatalf("token after re-campaigning %v <= %v", l2.Token(), l.Token())
	}
	resign(t, e)
}

// TestOneCampaignPerElection: while a Campaign of an Election is waiting,
// and while it leads, another Campaign (or Run) on it returns
// ErrCampaigning and leaves nothing; once leadership is lost (its node
// deleted by an operator) or resigned, Campaign works again.
func TestOneCampaignPerElection(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	other := newElection(t, rtest.Connect(t, cl), dir)
	campaign(t, other, "other")
	s := rtest.Connect(t, cl)
	e := newElection(t, s, dir)
	first := campaignAsync(context.Background(), e, "e")
	serverkit.Eventually(t, 10*time.Second, "e queued", func() bool { return len(in.Owned(dir, s.ID())) == 1 })
	if _, err := e.Campaign(context.Background(), []byte("again")); !errors.Is(err, election.ErrCampaigning) {
		t.Fatalf("second Campaign while one waits: %v, want ErrCampaigning", err)
	}
	resign(t, other)
	r := rtest.Await(t, first, 5*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := e.Campaign(context.Background(), nil); !errors.Is(err, election.ErrCampaigning) {
		t.Fatalf("Campaign while leading: %v, want ErrCampaigning", err)
	}
	fn := func(context.Context, fence.Token) error { return nil }
	if err := election.Run(context.Background(), e, nil, fn); !errors.Is(err, election.ErrCampaigning) {
		t.Fatalf("Run while leading: %v, want ErrCampaigning", err)
	}
	if n := in.Owned(dir, s.ID()); len(n) != 1 {
		t.Fatalf("e owns %v, want its one node", n)
	}
	// Lost leadership (an operator deletes the node): Campaign may go again.
	if err := in.Conn().Delete(cl.Chroot()+r.Lease.(interface{ Path() string }).Path(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Lease.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease survived the deletion of its node")
	}
	l := campaign(t, e, "e")
	if l.Token() <= r.Lease.Token() {
		t.Fatalf("token %v <= %v", l.Token(), r.Lease.Token())
	}
	resign(t, e)
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left: %v", c)
	}
}

// TestBadInput: invalid paths, a nil session, oversized values and nil Run
// arguments are refused with typed errors, and leave nothing.
func TestBadInput(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	s := rtest.Connect(t, cl)
	for _, p := range []string{"", "election", "/", "/election/", "/a//b", "/zookeeper/x", "/a/../b"} {
		if _, err := election.New(s, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q): %v, want ErrInvalidPath", p, err)
		}
	}
	if _, err := election.New(nil, dir); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("nil session: %v, want ErrBadOption", err)
	}
	e := newElection(t, s, dir)
	big := make([]byte, zookeeper.MaxNodeData+1)
	if _, err := e.Campaign(context.Background(), big); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("oversized value: %v, want ErrBadOption", err)
	}
	fn := func(context.Context, fence.Token) error { return nil }
	if err := election.Run(context.Background(), e, big, fn); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Run with an oversized value: %v, want ErrBadOption", err)
	}
	if err := election.Run(context.Background(), nil, nil, fn); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Run with a nil Election: %v, want ErrBadOption", err)
	}
	if err := election.Run(context.Background(), e, nil, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Run with a nil function: %v, want ErrBadOption", err)
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left: %v", c)
	}
	// The Election is still usable: the failed calls held nothing.
	campaign(t, e, "ok")
	resign(t, e)
}

// TestClosedSession: closing the session ends the leadership
// (ErrSessionClosed) and closes observers; New, Campaign, Leader and Run
// then return ErrSessionClosed, and Resign is a no-op.
func TestClosedSession(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl)
	e := newElection(t, s, dir)
	l := campaign(t, e, "x")
	obs := e.Observe(context.Background())
	if o := next(t, obs, 5*time.Second); !o.Present {
		t.Fatalf("observed %v, want a leader", o)
	}
	s.Close()
	if !errors.Is(context.Cause(l.Context()), recipe.ErrSessionClosed) {
		t.Fatalf("lease cause after Close: %v", context.Cause(l.Context()))
	}
	select {
	case o, ok := <-obs:
		if ok {
			t.Fatalf("observation %v after Close", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("observer not closed with the session")
	}
	if _, ok := <-e.Observe(context.Background()); ok {
		t.Fatal("Observe on a closed session delivered")
	}
	if _, err := election.New(s, dir); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("New: %v", err)
	}
	if err := e.Resign(context.Background()); err != nil {
		t.Fatalf("Resign after Close: %v", err)
	}
	if _, err := e.Campaign(context.Background(), nil); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("Campaign: %v", err)
	}
	if _, err := e.Leader(context.Background()); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("Leader: %v", err)
	}
	fn := func(context.Context, fence.Token) error { return nil }
	if err := election.Run(context.Background(), e, nil, fn); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Fatalf("Run: %v", err)
	}
}

// TestRunReturnsWhenCtxEnds: one Run leads (its function blocks on its
// context), another waits. Cancelling both with a cause makes both return
// that cause promptly; the leader function's context carries the same
// cause; no node is left (goroutines: TestMain checks with goleak).
func TestRunReturnsWhenCtxEnds(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	var log termLog
	leader := startRun(newElection(t, rtest.Connect(t, cl), dir), "leader", log.fn("leader"))
	serverkit.Eventually(t, 10*time.Second, "leader's function running", func() bool { _, ok := log.last("leader"); return ok })
	waiter := startRun(newElection(t, rtest.Connect(t, cl), dir), "waiter", log.fn("waiter"))
	serverkit.Eventually(t, 10*time.Second, "waiter queued", func() bool { return len(in.Children(dir)) == 2 })
	shutdown := errors.New("shutdown")
	// The waiter first: were the leader stopped first, its resignation
	// would hand leadership to the waiter before the waiter is stopped.
	for _, nr := range []struct {
		name string
		r    *runner
	}{{"waiter", waiter}, {"leader", leader}} {
		name, r := nr.name, nr.r
		r.cancel(shutdown)
		select {
		case err := <-r.done:
			if !errors.Is(err, shutdown) {
				t.Fatalf("%s's Run returned %v, want the cause", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s's Run did not return", name)
		}
	}
	if tm, _ := log.last("leader"); !errors.Is(tm.cause, shutdown) {
		t.Fatalf("leader function's cause %v, want the cause of Run's ctx", tm.cause)
	}
	if _, ok := log.last("waiter"); ok {
		t.Fatal("the waiter led")
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left behind: %v", c)
	}
}

// TestRunCampaignsAgainAfterFnReturns: the error of a leader function is
// logged, leadership is given up (its node deleted) and Run campaigns again
// with a new node: each leadership has a larger token, and only the current
// leader's node exists.
func TestRunCampaignsAgainAfterFnReturns(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	logs := &logCapture{}
	e := newElection(t, rtest.Connect(t, cl), dir, election.WithLogger(slog.New(logs)))
	var mu sync.Mutex
	var tokens []fence.Token
	r := startRun(e, "flaky", func(ctx context.Context, token fence.Token) error {
		mu.Lock()
		tokens = append(tokens, token)
		n := len(tokens)
		mu.Unlock()
		if n <= 3 {
			return fmt.Errorf("boom %d", n)
		}
		<-ctx.Done()
		return nil
	})
	serverkit.Eventually(t, 10*time.Second, "four leaderships", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens) == 4
	})
	if !logs.contains("boom 3") {
		t.Fatalf("the function's error was not logged: %q", logs.msgs)
	}
	mu.Lock()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v do not grow", tokens)
		}
	}
	mu.Unlock()
	if c := in.Children(dir); len(c) != 1 {
		t.Fatalf("nodes %v, want the current leader's only", c)
	}
	if err := r.stop(t, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if c := in.Children(dir); len(c) != 0 {
		t.Fatalf("left behind: %v", c)
	}
}

// TestRunStopsOnAnotherRecipesNodes (issue 14): a mutex holds the
// election's directory. Campaigning cannot succeed until someone changes
// the configuration, so Run returns recipe.ErrMixedRecipes instead of
// campaigning again (with a warning every few seconds) for ever, and
// leaves nothing behind.
func TestRunStopsOnAnotherRecipesNodes(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := rtest.HoldMutex(ctx, t, cl, dir)
	g := newGate()
	close(g.open)
	e := newElection(t, rtest.Connect(t, cl), dir, election.WithBackOff(func() backoff.BackOff { return g }))
	r := startRun(e, "candidate", func(context.Context, fence.Token) error {
		t.Error("the candidate led beside the mutex's holder")
		return nil
	})
	select {
	case err := <-r.done:
		if !errors.Is(err, recipe.ErrMixedRecipes) {
			t.Fatalf("Run returned %v, want recipe.ErrMixedRecipes", err)
		}
	case <-time.After(20 * time.Second):
		r.stop(t, 10*time.Second)
		t.Fatal("Run kept campaigning on a mutex's directory")
	}
	// Confirmed by a second campaign, after one backoff.
	if n := g.calls(); n != 1 {
		t.Errorf("Run waited %d backoffs before it stopped, want 1", n)
	}
	if c := in.Children(dir); len(c) != 1 || !strings.HasSuffix(c[0], mutex.Kind+"0000000000") {
		t.Fatalf("children %q, want the mutex's node alone", c)
	}
	// Reading the directory as an election is refused too: there is no
	// leader, but not because nobody holds it.
	e = newElection(t, rtest.Connect(t, cl), dir)
	if l, err := e.Leader(ctx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("Leader on a mutex's directory: %+v, %v; want recipe.ErrMixedRecipes", l, err)
	}
	if ps, err := e.Participants(ctx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("Participants on a mutex's directory: %v, %v; want recipe.ErrMixedRecipes", ps, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// gate is a backoff policy whose first wait lasts until open is closed
// (paused is closed when it starts); every wait is 1 ms otherwise.
type gate struct {
	paused, open chan struct{}
	mu           sync.Mutex
	n            int
}

func newGate() *gate { return &gate{paused: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) NextBackOff() time.Duration {
	g.mu.Lock()
	g.n++
	first := g.n == 1
	g.mu.Unlock()
	if first {
		close(g.paused)
		<-g.open
	}
	return time.Millisecond
}

func (g *gate) Reset() {}

func (g *gate) calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// TestRunOutlivesAStrayNode (issue 14): another recipe's node that is on
// the election's path for a moment only (a lock taken there by mistake,
// and released) does not end Run: the campaign that meets it backs off,
// and the next one, which no longer does, leads. (A node that stays ends
// Run at the second campaign: TestRunStopsOnAnotherRecipesNodes.)
func TestRunOutlivesAStrayNode(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stray := rtest.HoldMutex(ctx, t, cl, dir)
	g := newGate()
	e := newElection(t, rtest.Connect(t, cl), dir, election.WithBackOff(func() backoff.BackOff { return g }))
	led := make(chan fence.Token, 1)
	r := startRun(e, "candidate", func(ctx context.Context, token fence.Token) error {
		select {
		case led <- token:
		default:
		}
		<-ctx.Done()
		return nil
	})
	select {
	case <-g.paused: // the first campaign met the stray node, and backs off
	case err := <-r.done:
		t.Fatalf("Run ended on another recipe's node met once: %v", err)
	case <-ctx.Done():
		t.Fatal("the first campaign never backed off")
	}
	if err := stray.Release(ctx); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	select {
	case <-led:
	case err := <-r.done:
		t.Fatalf("Run ended after the stray node went: %v", err)
	case <-ctx.Done():
		t.Fatal("no leadership after the stray node went")
	}
	if err := r.stop(t, 20*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run stopped with %v, want context.Canceled", err)
	}
}

// TestObserveEndsOnAnotherRecipesNodes (issue 14): Observe on a directory
// another recipe keeps using (a mutex's) cannot deliver anything, ever: it
// closes its channel, after a second read a second later confirmed it,
// with one error line (it warned every second for ever).
func TestObserveEndsOnAnotherRecipesNodes(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held := rtest.HoldMutex(ctx, t, cl, dir)
	logs := &logCapture{}
	e := newElection(t, rtest.Connect(t, cl, zookeeper.WithLogger(slog.New(logs))), dir)
	select {
	case o, ok := <-e.Observe(ctx):
		if ok {
			t.Fatalf("Observe on a mutex's directory delivered %+v", o)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Observe on a mutex's directory did not end")
	}
	if ctx.Err() != nil {
		t.Fatal("the channel closed with ctx")
	}
	logs.mu.Lock()
	var warns, errs int
	for _, m := range logs.msgs {
		switch {
		case strings.HasPrefix(m, "observe: reading the queue head failed; retrying"):
			warns++
		case strings.HasPrefix(m, "observe: reading the queue head failed, and retrying cannot help"):
			errs++
		}
	}
	logs.mu.Unlock()
	if warns != 1 || errs != 1 {
		t.Errorf("%d warnings and %d errors, want one of each: %q", warns, errs, logs.msgs)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
