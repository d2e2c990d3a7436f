// Package leadtest checks leader.Run on a backend, through the backend's
// locktest.Harness, so that the root module (ZooKeeper, memlock) and every
// backend module run the same scenario on their real servers.
package leadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// term is one leadership as fn saw it.
type term struct {
	who      int
	token    fence.Token
	ctx      context.Context // fn's context
	stepDown chan struct{}   // closed to make fn return
}

// Run runs leader.Run for three candidates, each on a client of h of its
// own, and checks:
//
//   - one leader at a time: fn never starts while another fn's context is
//     live, and every leader's fenced write is accepted;
//   - a leader whose fn returns gives the lock up, and a candidate leads
//     again with a larger token;
//   - a leader cut off from the backend sees fn's context end with an
//     ownership-loss cause within LeaseTime.Max, and another candidate
//     takes over (after that context ended);
//   - when the caller ends the loops' context with a cause, the leader's fn
//     sees that cause and every Run returns it (and nothing earlier), and
//     the lock is left with no entry.
func Run(t *testing.T, h locktest.Harness) {
	const (
		lock = "leader-loop"
		n    = 3
	)
	lt := h.LeaseTime()
	wait := 2 * lt.Max // bounds a step that waits for an expiry
	clients := make([]locktest.Client, n)
	for i := range clients {
		clients[i] = h.NewClient(t, lock)
	}
	ls := &leaderships{t: t, elected: make(chan *term, 16)}
	stopped := errors.New("leadtest: stopped by the test")
	ctx, stop := context.WithCancelCause(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(stopped); wg.Wait() }()
	results := runCandidates(ctx, t, &wg, clients, ls)

	first := ls.next("at the start", locktest.OpTimeout)
	close(first.stepDown)
	second := ls.next("after the leader's fn returned", locktest.OpTimeout)
	if second.token <= first.token {
		t.Errorf("token %v after a step-down is not larger than %v", second.token, first.token)
	}
	third := cutOff(t, ls, clients[second.who], second, lt.Max, wait)

	stop(stopped)
	for range n {
		select {
		case err := <-results:
			if !errors.Is(err, stopped) {
				t.Errorf("leader.Run returned %v after the stop, want the stop's cause", err)
			}
		case <-time.After(wait):
			t.Fatalf("leader.Run still running %v after the stop", wait)
		}
	}
	if cause := context.Cause(third.ctx); !errors.Is(cause, stopped) {
		t.Errorf("the leader's fn context ended with %v at the stop, want the stop's cause", cause)
	}
	ls.checkTokens()
	if err := waitLeftovers(h, lock, wait); err != nil {
		t.Error(err)
	}
}

// leaderships is what the candidates' fns saw: the current leadership,
// every leadership's token in order, a fenced register every leader
// writes, and each new leadership, sent on elected.
type leaderships struct {
	t       *testing.T
	mu      sync.Mutex
	cur     *term
	terms   []fence.Token
	guard   fence.Guard
	elected chan *term
}

// fn is candidate who's leader function: it checks that no other
// leadership is live and that its fenced write is accepted, reports the
// leadership on elected, and leads until its context ends or it is told
// to step down.
func (ls *leaderships) fn(who int) func(context.Context, fence.Token) error {
	t := ls.t
	return func(ctx context.Context, token fence.Token) error {
		tm := &term{who: who, token: token, ctx: ctx, stepDown: make(chan struct{})}
		ls.mu.Lock()
		if ls.cur != nil && ls.cur.ctx.Err() == nil {
			t.Errorf("two leaders: candidate %d leads (token %v) while candidate %d's leadership (token %v) is live",
				who, token, ls.cur.who, ls.cur.token)
		}
		ls.cur = tm
		ls.terms = append(ls.terms, token)
		ls.mu.Unlock()
		if err := ls.guard.Check("leadtest", token); err != nil {
			t.Errorf("candidate %d: fenced write as leader refused: %v", who, err)
		}
		select {
		case ls.elected <- tm:
		default:
			t.Errorf("candidate %d: more leaderships than expected", who)
		}
		select {
		case <-ctx.Done():
		case <-tm.stepDown:
		}
		return nil
	}
}

// next waits up to d for the next leadership; what says when, if none
// comes.
func (ls *leaderships) next(what string, d time.Duration) *term {
	ls.t.Helper()
	select {
	case tm := <-ls.elected:
		return tm
	case <-time.After(d):
		ls.t.Fatalf("no leader within %v %s", d, what)
		return nil
	}
}

// checkTokens checks that every leadership's token is larger than its
// predecessor's.
func (ls *leaderships) checkTokens() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for i := 1; i < len(ls.terms); i++ {
		if ls.terms[i] <= ls.terms[i-1] {
			ls.t.Errorf("leadership %d's token %v is not larger than its predecessor's %v", i, ls.terms[i], ls.terms[i-1])
		}
	}
}

// runCandidates runs leader.Run on each client until ctx ends, with its
// warnings in the test's log, and sends what each returns on the returned
// channel; wg is done when every one has returned.
func runCandidates(ctx context.Context, t *testing.T, wg *sync.WaitGroup, clients []locktest.Client, ls *leaderships) <-chan error {
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	results := make(chan error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := leader.Run(ctx, c, ls.fn(i), leader.WithLogger(log.With("candidate", i)))
			if ctx.Err() == nil {
				t.Errorf("candidate %d: leader.Run returned before the stop: %v", i, err)
			}
			results <- err
		}()
	}
	return results
}

// cutOff cuts off c, the client of the leadership old, and checks that
// another candidate leads within leaseMax (waiting up to wait for it),
// after old's fn context ended with an ownership-loss cause; it heals c
// and returns the new leadership.
func cutOff(t *testing.T, ls *leaderships, c locktest.Client, old *term, leaseMax, wait time.Duration) *term {
	cut := time.Now()
	c.CutOff()
	next := ls.next("after the leader was cut off", wait)
	took := time.Since(cut)
	if next.who == old.who {
		t.Fatalf("the cut-off candidate %d led again while cut off", old.who)
	}
	if err := old.ctx.Err(); err == nil {
		t.Errorf("the cut-off leader's fn context is live while candidate %d leads", next.who)
	} else if cause := context.Cause(old.ctx); !lost(cause) {
		t.Errorf("the cut-off leader's fn context ended with %v, want an ownership-loss cause", cause)
	}
	if took > leaseMax {
		t.Errorf("a new leader took over %v after the leader was cut off, later than LeaseTime.Max = %v", took, leaseMax)
	}
	t.Logf("cut-off leader replaced after %v", took.Round(time.Millisecond))
	c.Heal()
	return next
}

// lost reports whether cause is one that ends a lease without a Release.
func lost(cause error) bool {
	for _, c := range []error{recipe.ErrSuspended, recipe.ErrSessionLost, recipe.ErrNodeDeleted} {
		if errors.Is(cause, c) {
			return true
		}
	}
	return false
}

// waitLeftovers waits until the backend stores nothing for lock (a lease
// given up while cut off may be cleaned up in the background).
func waitLeftovers(h locktest.Harness, lock string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), locktest.OpTimeout)
		n, err := h.Leftovers(ctx, lock)
		cancel()
		switch {
		case err != nil:
			return fmt.Errorf("counting leftovers: %w", err)
		case n == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d entries left behind %v after every leader.Run returned", n, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testWriter sends the loops' warnings to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
