package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// basics: the contract of one hand-over between two clients.
func (s *suite) basics(t *testing.T) {
	const lock = "basics"
	a, b := s.h.NewClient(t, lock), s.h.NewClient(t, lock)

	la, err := a.TryAcquire(stepCtx(t))
	if err != nil {
		t.Fatalf("A: TryAcquire of a lock nobody holds: %v", err)
	}
	checkFresh(t, la, "A")
	if lb, err := b.TryAcquire(stepCtx(t)); err == nil {
		releaseQuietly(lb)
		t.Fatalf("B: TryAcquire succeeded while A holds the lock (tokens %v and %v)", la.Token(), lb.Token())
	} else if !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("B: TryAcquire while A holds: %v, want an error matching recipe.ErrLocked", err)
	}
	s.expectLeftovers(t, lock, 1, "A's grant only: a refused TryAcquire leaves nothing")

	pb := s.acquireAsync(t, b, nil)
	release(t, la, "A")
	if cause := context.Cause(la.Context()); !errors.Is(cause, recipe.ErrReleased) {
		t.Errorf("A: lease context cause after Release = %v, want recipe.ErrReleased", cause)
	}
	if err := la.Release(stepCtx(t)); err != nil {
		t.Errorf("A: second Release = %v, want nil (Release is idempotent)", err)
	}
	r := await(t, pb, OpTimeout, "B, waiting while A released")
	if r.lease.Token() <= la.Token() {
		t.Errorf("B's token %v is not larger than A's earlier token %v", r.lease.Token(), la.Token())
	}
	// A deferred Release at shutdown: the removal ignores ctx's
	// cancellation, and one that completes is a success.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.lease.Release(done); err != nil {
		t.Errorf("B: Release with a context already done = %v, want nil (the removal ignores the cancellation)", err)
		release(t, r.lease, "B")
	}
	s.expectLeftovers(t, lock, 0, "every grant was released")
}

// mutualExclusion: workers contend with Acquire (even ones) and TryAcquire
// (odd ones); no two are ever inside the critical section together.
func (s *suite) mutualExclusion(t *testing.T) {
	const (
		lock    = "mutual-exclusion"
		workers = 6
		rounds  = 8
	)
	clients := make([]Client, workers)
	for i := range clients {
		clients[i] = s.h.NewClient(t, lock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*OpTimeout)
	defer cancel()
	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		tokens   []fence.Token // in grant order (appended inside the critical section)
		guard    fence.Guard
		counter  int // protected by the lock itself, checked through guard
		wg       sync.WaitGroup
	)
	for w, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				var l recipe.Lease
				var err error
				for {
					if w%2 == 0 {
						l, err = c.Acquire(ctx)
					} else {
						l, err = c.TryAcquire(ctx)
					}
					if !errors.Is(err, recipe.ErrLocked) || w%2 == 0 {
						break
					}
					sleepCtx(ctx, time.Millisecond)
				}
				if err != nil {
					t.Errorf("worker %d round %d: %v", w, i, err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				if err := l.Context().Err(); err != nil {
					t.Errorf("worker %d: lease context done at the grant: %v", w, context.Cause(l.Context()))
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				if err := guard.Do("counter", l.Token(), func() error { counter++; return nil }); err != nil {
					t.Errorf("worker %d: fenced write rejected: %v", w, err)
				}
				time.Sleep(time.Millisecond) // widen the window in which an overlap would show
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("worker %d: Release: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d grants overlapped with another holder", n)
	}
	if counter != workers*rounds {
		t.Errorf("%d fenced writes accepted, want %d", counter, workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("grant %d has token %v, not larger than the previous grant's %v", i, tokens[i], tokens[i-1])
		}
	}
	if t.Failed() {
		return
	}
	s.expectLeftovers(t, lock, 0, "every grant was released")
}

// crashedHolderFreed: the lock of a crashed holder is held until its lease
// expires, then granted to the waiter: within [Min, Max] of the crash.
func (s *suite) crashedHolderFreed(t *testing.T) {
	const lock = "crashed-holder"
	a, b, c := s.h.NewClient(t, lock), s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, nil)

	crashed := time.Now()
	a.Crash()
	if lc, err := c.TryAcquire(stepCtx(t)); err == nil {
		releaseQuietly(lc)
		t.Errorf("the lock was free right after its holder crashed: its lease must last until it expires")
	} else if !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("C: TryAcquire right after the holder crashed: %v, want recipe.ErrLocked", err)
	}

	r := await(t, pb, s.expiryWait(), "B, waiting for the crashed holder's lease to expire")
	freed := r.at.Sub(crashed)
	t.Logf("the crashed holder's lock was granted to B %v after the crash", freed.Round(time.Millisecond))
	if freed > s.lt.Max {
		t.Errorf("granted %v after the crash, later than LeaseTime.Max = %v", freed, s.lt.Max)
	}
	if freed < s.lt.Min {
		t.Errorf("granted %v after the crash, sooner than LeaseTime.Min = %v: the lease did not last", freed, s.lt.Min)
	}
	if r.lease.Token() <= la.Token() {
		t.Errorf("B's token %v is not larger than the crashed holder's %v", r.lease.Token(), la.Token())
	}
	release(t, r.lease, "B")
	s.expectLeftovers(t, lock, 0, "the crashed holder's entry expired with it and B released")
}

// fencingRejectsStaleWriter: Kleppmann's scenario. A (token 33) pauses past
// its lease; B acquires (token 34) and writes; A resumes and writes with 33:
// the resource must refuse it.
func (s *suite) fencingRejectsStaleWriter(t *testing.T) {
	const (
		lock     = "fencing"
		resource = "fenced-resource"
	)
	a, b := s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	var (
		guard fence.Guard
		value string // the resource, written only through guard
	)
	write := func(tok fence.Token, v string) error {
		return guard.Do(resource, tok, func() error { value = v; return nil })
	}

	la := s.acquire(t, a, "A")
	if err := write(la.Token(), "A1"); err != nil {
		t.Fatalf("A's first write with token %v: %v", la.Token(), err)
	}
	pb := s.acquireAsync(t, b, nil)
	a.CutOff() // A pauses: nothing it does reaches the backend, it notices nothing
	r := await(t, pb, s.expiryWait(), "B, waiting for the paused holder's lease to expire")
	lb := r.lease
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %v is not larger than A's %v: the resource can't tell the stale writer", lb.Token(), la.Token())
	}
	if err := write(lb.Token(), "B1"); err != nil {
		t.Fatalf("B's write with token %v: %v", lb.Token(), err)
	}

	a.Heal() // A resumes where it paused and finishes its write with its old token
	err := write(la.Token(), "A2")
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("A's late write with token %v after B wrote with %v: %v, want fence.ErrStale", la.Token(), lb.Token(), err)
	}
	if value != "B1" {
		t.Errorf("resource holds %q after the stale write, want B's %q", value, "B1")
	}
	if err := write(lb.Token(), "B2"); err != nil {
		t.Errorf("B's second write with token %v: %v", lb.Token(), err)
	}
	releaseQuietly(la) // StaleReleaseKeepsNewHolder checks what this returns
	release(t, lb, "B")
}

// staleReleaseKeepsNewHolder: A loses its lease while cut off, B is granted,
// A heals and calls Release: ErrLeaseLost, and B keeps the lock.
func (s *suite) staleReleaseKeepsNewHolder(t *testing.T) {
	const lock = "stale-release"
	a, b, c := s.h.NewClient(t, lock), s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	pb := s.acquireAsync(t, b, nil)
	a.CutOff()
	lb := await(t, pb, s.expiryWait(), "B, waiting for the cut-off holder's lease to expire").lease
	a.Heal()

	if err := la.Release(stepCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release after losing the lease = %v, want an error matching recipe.ErrLeaseLost", err)
	}
	if cause := context.Cause(la.Context()); !lossCause(cause) {
		t.Errorf("A: lease context cause after the stale Release = %v, want the ownership loss", cause)
	}
	// Let A reach the backend again (and run any cleanup it does on
	// reconnection): it sees B's grant.
	s.untilLocked(t, a, "A, after healing")
	time.Sleep(200 * time.Millisecond) // room for asynchronous cleanup to misbehave

	if err := lb.Context().Err(); err != nil {
		t.Errorf("B's lease ended after the stale holder's Release (cause %v)", context.Cause(lb.Context()))
	}
	if lc, err := c.TryAcquire(stepCtx(t)); err == nil {
		releaseQuietly(lc)
		t.Fatalf("C acquired while B holds: the stale holder's Release removed B's grant")
	} else if !errors.Is(err, recipe.ErrLocked) {
		t.Errorf("C: TryAcquire while B holds: %v, want recipe.ErrLocked", err)
	}
	s.expectLeftovers(t, lock, 1, "B's grant only")
	release(t, lb, "B")

	la2 := s.acquire(t, a, "A, after healing") // A recovered
	if la2.Token() <= lb.Token() {
		t.Errorf("A's new token %v is not larger than B's %v", la2.Token(), lb.Token())
	}
	release(t, la2, "A")
	s.expectLeftovers(t, lock, 0, "every grant was released")
}

// untilLocked polls TryAcquire on c until it answers ErrLocked (c reaches the
// backend and sees the current holder). Other errors are retried: c may be
// reconnecting. A success fails the test.
func (s *suite) untilLocked(t *testing.T, c Client, who string) {
	t.Helper()
	deadline := time.Now().Add(s.expiryWait())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
		l, err := c.TryAcquire(ctx)
		cancel()
		if err == nil {
			releaseQuietly(l)
			t.Fatalf("%s: TryAcquire succeeded while another client holds the lock", who)
		}
		if errors.Is(err, recipe.ErrLocked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still can't reach the backend after %v: %v", who, s.expiryWait(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownershipLossCancelsContext: a cut-off holder's lease context ends, with an
// ownership-loss cause, within Max and before anyone else is granted.
func (s *suite) ownershipLossCancelsContext(t *testing.T) {
	const lock = "ownership-loss"
	a, b := s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	var liveAtGrant atomic.Bool
	pb := s.acquireAsync(t, b, func(l recipe.Lease, err error) {
		if err == nil && la.Context().Err() == nil {
			liveAtGrant.Store(true)
		}
	})

	cut := time.Now()
	a.CutOff()
	if !waitDone(la.Context(), s.expiryWait()) {
		t.Fatalf("A's lease context is still live %v after A was cut off", s.expiryWait())
	}
	lost := time.Since(cut)
	t.Logf("the cut-off holder's lease context ended %v after the cut", lost.Round(time.Millisecond))
	if lost > s.lt.Max {
		t.Errorf("A's lease context ended %v after the cut, later than LeaseTime.Max = %v", lost, s.lt.Max)
	}
	if cause := context.Cause(la.Context()); !lossCause(cause) {
		t.Errorf("A's lease context cause = %v, want one matching recipe.ErrSuspended, ErrSessionLost or ErrNodeDeleted", cause)
	}
	r := await(t, pb, s.expiryWait(), "B, waiting for the cut-off holder's lease to expire")
	if liveAtGrant.Load() {
		t.Errorf("B was granted while A's lease context was still live: two holders")
	}
	a.Heal()
	if err := la.Release(stepCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("A: Release after losing the lease = %v, want an error matching recipe.ErrLeaseLost", err)
	}
	release(t, r.lease, "B")
}

// cancellationLeavesNothing: every way an attempt can end without a grant
// returns the right error and leaves no entry.
func (s *suite) cancellationLeavesNothing(t *testing.T) {
	const lock = "cancellation"
	a, b, c := s.h.NewClient(t, lock), s.h.NewClient(t, lock), s.h.NewClient(t, lock)
	la := s.acquire(t, a, "A")
	giveUp := errors.New("locktest: the caller gave up")
	// got checks an attempt that must fail with an error matching want.
	got := func(what string, l recipe.Lease, err, want error) {
		t.Helper()
		if err == nil {
			releaseQuietly(l)
			t.Fatalf("B: %s: granted while A holds the lock", what)
		}
		if !errors.Is(err, want) {
			t.Errorf("B: %s: %v, want an error matching %v", what, err, want)
		}
	}

	l, err := b.TryAcquire(stepCtx(t))
	got("TryAcquire while A holds", l, err, recipe.ErrLocked)

	cctx, ccancel := context.WithCancelCause(context.Background())
	ccancel(giveUp)
	l, err = acquireWithin(t, "B", b, cctx)
	got("Acquire with a context already cancelled", l, err, giveUp)

	dctx, dcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	l, err = acquireWithin(t, "B", b, dctx)
	dcancel()
	got("Acquire whose deadline passes while waiting", l, err, context.DeadlineExceeded)

	// Cancelled while queued: give the waiter time to queue (backends that
	// queue waiters show a second entry), then cancel it.
	qctx, qcancel := context.WithCancelCause(context.Background())
	queued := make(chan result, 1)
	go func() {
		l, err := b.Acquire(qctx)
		queued <- result{lease: l, err: err}
	}()
	for i := 0; i < 50; i++ {
		if n, err := s.h.Leftovers(stepCtx(t), lock); err != nil || n >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	qcancel(giveUp)
	select {
	case r := <-queued:
		got("Acquire cancelled while queued", r.lease, r.err, giveUp)
	case <-time.After(OpTimeout):
		t.Fatalf("B: Acquire did not return within %v of its context's cancellation", OpTimeout)
	}

	// Cancelled at assorted moments, some while the request is in flight.
	for i := 0; i < 16; i++ {
		rctx, rcancel := context.WithCancelCause(context.Background())
		stop := time.AfterFunc(time.Duration(i)*500*time.Microsecond, func() { rcancel(giveUp) })
		l, err := acquireWithin(t, "B", b, rctx)
		stop.Stop()
		rcancel(nil)
		got("Acquire cancelled in flight", l, err, giveUp)
	}
	s.expectLeftovers(t, lock, 1, "A's grant only: no cancelled attempt left an entry")

	release(t, la, "A")
	s.expectLeftovers(t, lock, 0, "A released and no cancelled attempt left an entry")
	lc, err := c.TryAcquire(stepCtx(t))
	if err != nil {
		t.Fatalf("C: TryAcquire of the lock nobody holds: %v (something left behind blocks it)", err)
	}
	release(t, lc, "C")

	// The lock is free: B's attempts, cancelled or given a deadline at
	// assorted moments, are often granted while in flight. An error from
	// Acquire leaves nothing behind by the time it returns, so C is granted
	// right after each.
	blocked := 0
	for i := 0; i < 32; i++ {
		after := time.Duration(i/2) * 500 * time.Microsecond
		var l recipe.Lease
		var err error
		want := error(giveUp)
		if i%2 == 0 {
			rctx, rcancel := context.WithCancelCause(context.Background())
			stop := time.AfterFunc(after, func() { rcancel(giveUp) })
			l, err = acquireWithin(t, "B", b, rctx)
			stop.Stop()
			rcancel(nil)
		} else {
			want = context.DeadlineExceeded
			dctx, dcancel := context.WithTimeout(context.Background(), after)
			l, err = acquireWithin(t, "B", b, dctx)
			dcancel()
		}
		if err == nil { // granted before the cancellation
			release(t, l, "B")
			continue
		}
		if !errors.Is(err, want) {
			t.Errorf("B: Acquire of a free lock, ended by its context: %v, want an error matching %v", err, want)
		}
		lc, err := c.TryAcquire(stepCtx(t))
		if err != nil {
			blocked++
			t.Errorf("C: TryAcquire right after B's cancelled Acquire returned, nobody holding: %v (B's attempt was still there)", err)
			s.expectLeftovers(t, lock, 0, "B's cancelled attempt is gone")
			continue
		}
		release(t, lc, "C")
	}
	if blocked > 0 {
		t.Logf("%d of 32 cancelled attempts still blocked the lock when Acquire returned", blocked)
	}

	// The same on locks nobody used yet, each attempt on a new one (for
	// ZooKeeper the lock's directory does not exist: the create takes
	// several round trips, and a cancelled attempt must still have none
	// left that could land after Acquire returned).
	blocked = 0
	for i := 0; i < 8; i++ {
		fresh := fmt.Sprintf("%s-fresh-%d", lock, i)
		b, c := s.h.NewClient(t, fresh), s.h.NewClient(t, fresh)
		rctx, rcancel := context.WithCancelCause(context.Background())
		stop := time.AfterFunc(time.Duration(i)*250*time.Microsecond, func() { rcancel(giveUp) })
		l, err := acquireWithin(t, "B", b, rctx)
		stop.Stop()
		rcancel(nil)
		if err == nil {
			release(t, l, "B")
			continue
		}
		if !errors.Is(err, giveUp) {
			t.Errorf("B: Acquire of a new lock, cancelled: %v, want an error matching %v", err, giveUp)
		}
		lc, err := c.TryAcquire(stepCtx(t))
		if err != nil {
			blocked++
			t.Errorf("C: TryAcquire of %s right after B's cancelled Acquire returned, nobody holding: %v (B's attempt was still there)", fresh, err)
			s.expectLeftovers(t, fresh, 0, "B's cancelled attempt is gone")
			continue
		}
		release(t, lc, "C")
	}
	if blocked > 0 {
		t.Logf("%d of 8 cancelled attempts on new locks still blocked the lock when Acquire returned", blocked)
	}
}

// leaderFailover: three candidates campaign for leadership with the lock.
// The leader is cut off, its successor crashes, the next one steps down; each
// time exactly one candidate takes over, never while the previous live
// leader's lease context is live, and every leader's fenced write is accepted.
func (s *suite) leaderFailover(t *testing.T) {
	const (
		lock = "leader-failover"
		n    = 3
	)
	type candidate struct {
		c        Client
		troubled atomic.Bool // cut off or crashed: its Acquire errors are expected
		dead     atomic.Bool // crashed: no more calls on it
		retire   chan struct{}
	}
	cands := make([]*candidate, n)
	for i := range cands {
		cands[i] = &candidate{c: s.h.NewClient(t, lock), retire: make(chan struct{})}
	}
	var (
		mu      sync.Mutex
		leader  recipe.Lease // the latest leader's lease
		leaderI = -1
		terms   []fence.Token
		guard   fence.Guard
	)
	elected := make(chan int, 4*n)
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()

	campaign := func(i int, cd *candidate) {
		for runCtx.Err() == nil && !cd.dead.Load() {
			l, err := cd.c.Acquire(runCtx)
			if err != nil {
				if runCtx.Err() != nil || cd.dead.Load() {
					return
				}
				if !cd.troubled.Load() {
					t.Errorf("candidate %d: Acquire: %v", i, err)
					return
				}
				sleepCtx(runCtx, 50*time.Millisecond)
				continue
			}
			mu.Lock()
			if leader != nil && !cands[leaderI].dead.Load() && leader.Context().Err() == nil {
				t.Errorf("two leaders: candidate %d elected (token %v) while candidate %d's lease (token %v) is live",
					i, l.Token(), leaderI, leader.Token())
			}
			leader, leaderI = l, i
			terms = append(terms, l.Token())
			mu.Unlock()
			if err := guard.Check("leadership", l.Token()); err != nil {
				t.Errorf("candidate %d: fenced write as leader rejected: %v", i, err)
			}
			select {
			case elected <- i:
			default:
				t.Errorf("candidate %d: more elections than expected", i)
			}
			retired := false
			select {
			case <-l.Context().Done():
			case <-cd.retire:
				retired = true
			case <-runCtx.Done():
			}
			if cd.dead.Load() {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
			err = l.Release(ctx)
			cancel()
			if err != nil && !cd.troubled.Load() {
				t.Errorf("candidate %d: Release: %v", i, err)
			}
			if retired {
				return
			}
		}
	}
	for i, cd := range cands {
		wg.Add(1)
		go func() { defer wg.Done(); campaign(i, cd) }()
	}
	next := func(what string, d time.Duration) int {
		t.Helper()
		select {
		case i := <-elected:
			return i
		case <-time.After(d):
			t.Fatalf("no new leader within %v: %s", d, what)
			return -1
		}
	}

	first := next("the first election", OpTimeout)
	cands[first].troubled.Store(true)
	cut := time.Now()
	cands[first].c.CutOff()
	second := next("after the leader was cut off", s.expiryWait())
	if second == first {
		t.Fatalf("the cut-off leader %d was elected again while cut off", first)
	}
	if d := time.Since(cut); d > s.lt.Max {
		t.Errorf("a new leader took over %v after the leader was cut off, later than LeaseTime.Max = %v", d, s.lt.Max)
	}

	cands[second].troubled.Store(true)
	cands[second].dead.Store(true)
	crashed := time.Now()
	cands[second].c.Crash()
	third := next("after the leader crashed", s.expiryWait())
	if third == first || third == second {
		t.Fatalf("candidate %d elected after %d crashed while %d is cut off", third, second, first)
	}
	if d := time.Since(crashed); d > s.lt.Max {
		t.Errorf("a new leader took over %v after the leader crashed, later than LeaseTime.Max = %v", d, s.lt.Max)
	}

	cands[first].c.Heal()
	close(cands[third].retire)
	fourth := next("after the leader stepped down with the healed candidate waiting", s.expiryWait())
	if fourth != first {
		t.Fatalf("candidate %d elected after %d stepped down; want the healed candidate %d", fourth, third, first)
	}
	stop()
	wg.Wait()

	if len(terms) != 4 {
		t.Errorf("%d elections, want 4", len(terms))
	}
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Errorf("leader %d's token %v is not larger than its predecessor's %v", i, terms[i], terms[i-1])
		}
	}
}
