package locktest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// leaderFailover: three candidates campaign for leadership with the lock.
// The leader is cut off, its successor crashes, the next one steps down; each
// time exactly one candidate takes over, never while the previous live
// leader's lease context is live, and every leader's fenced write is accepted.
func (s *suite) leaderFailover(t *testing.T) {
	const (
		lock = "leader-failover"
		n    = 3
	)
	e := &election{t: t, leaderI: -1, elected: make(chan int, 4*n)}
	for range n {
		e.cands = append(e.cands, &candidate{c: s.h.NewClient(t, lock), retire: make(chan struct{})})
	}
	var stop context.CancelFunc
	e.runCtx, stop = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i, cd := range e.cands {
		wg.Add(1)
		go func() { defer wg.Done(); e.campaign(i, cd) }()
	}
	cands := e.cands

	first := e.next("the first election", OpTimeout)
	cands[first].troubled.Store(true)
	cut := time.Now()
	cands[first].c.CutOff()
	second := e.next("after the leader was cut off", s.expiryWait())
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
	third := e.next("after the leader crashed", s.expiryWait())
	if third == first || third == second {
		t.Fatalf("candidate %d elected after %d crashed while %d is cut off", third, second, first)
	}
	if d := time.Since(crashed); d > s.lt.Max {
		t.Errorf("a new leader took over %v after the leader crashed, later than LeaseTime.Max = %v", d, s.lt.Max)
	}

	cands[first].c.Heal()
	close(cands[third].retire)
	fourth := e.next("after the leader stepped down with the healed candidate waiting", s.expiryWait())
	if fourth != first {
		t.Fatalf("candidate %d elected after %d stepped down; want the healed candidate %d", fourth, third, first)
	}
	stop()
	wg.Wait()
	e.checkTerms()
}

// candidate is one client of leaderFailover.
type candidate struct {
	c        Client
	troubled atomic.Bool // cut off or crashed: its Acquire errors are expected
	dead     atomic.Bool // crashed: no more calls on it
	retire   chan struct{}
}

// election is leaderFailover's state: the candidates and every term.
type election struct {
	t       *testing.T
	cands   []*candidate
	runCtx  context.Context // ends every campaign
	elected chan int        // each new leader's index

	mu      sync.Mutex
	leader  recipe.Lease // the latest leader's lease
	leaderI int
	terms   []fence.Token
	guard   fence.Guard
}

// campaign is candidate i's loop: acquire, lead until the lease ends or
// the candidate retires, release, again.
func (e *election) campaign(i int, cd *candidate) {
	for e.runCtx.Err() == nil && !cd.dead.Load() {
		l, err := cd.c.Acquire(e.runCtx)
		if err != nil {
			if e.runCtx.Err() != nil || cd.dead.Load() {
				return
			}
			if !cd.troubled.Load() {
				e.t.Errorf("candidate %d: Acquire: %v", i, err)
				return
			}
			sleepCtx(e.runCtx, 50*time.Millisecond)
			continue
		}
		if e.lead(i, cd, l) {
			return
		}
	}
}

// lead is candidate i's term under lease l. It reports whether the
// campaign ends (the candidate crashed or retired).
func (e *election) lead(i int, cd *candidate, l recipe.Lease) (end bool) {
	t := e.t
	e.mu.Lock()
	if e.leader != nil && !e.cands[e.leaderI].dead.Load() && e.leader.Context().Err() == nil {
		t.Errorf("two leaders: candidate %d elected (token %v) while candidate %d's lease (token %v) is live",
			i, l.Token(), e.leaderI, e.leader.Token())
	}
	e.leader, e.leaderI = l, i
	e.terms = append(e.terms, l.Token())
	e.mu.Unlock()
	if err := e.guard.Check("leadership", l.Token()); err != nil {
		t.Errorf("candidate %d: fenced write as leader rejected: %v", i, err)
	}
	select {
	case e.elected <- i:
	default:
		t.Errorf("candidate %d: more elections than expected", i)
	}
	retired := false
	select {
	case <-l.Context().Done():
	case <-cd.retire:
		retired = true
	case <-e.runCtx.Done():
	}
	if cd.dead.Load() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	err := l.Release(ctx)
	cancel()
	if err != nil && !cd.troubled.Load() {
		t.Errorf("candidate %d: Release: %v", i, err)
	}
	return retired
}

// next waits up to d for the next leader and returns its index.
func (e *election) next(what string, d time.Duration) int {
	e.t.Helper()
	select {
	case i := <-e.elected:
		return i
	case <-time.After(d):
		e.t.Fatalf("no new leader within %v: %s", d, what)
		return -1
	}
}

// checkTerms checks, once every campaign ended, that there were four terms
// with growing tokens.
func (e *election) checkTerms() {
	t, terms := e.t, e.terms
	if len(terms) != 4 {
		t.Errorf("%d elections, want 4", len(terms))
	}
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Errorf("leader %d's token %v is not larger than its predecessor's %v", i, terms[i], terms[i-1])
		}
	}
}
