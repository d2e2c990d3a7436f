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
	"github.com/zkrecipes/zkrecipes/recipe/locktest"
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
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var (
		mu    sync.Mutex
		cur   *term
		terms []fence.Token
		guard fence.Guard
	)
	elected := make(chan *term, 16)
	fn := func(who int) func(context.Context, fence.Token) error {
		return func(ctx context.Context, token fence.Token) error {
			tm := &term{who: who, token: token, ctx: ctx, stepDown: make(chan struct{})}
			mu.Lock()
			if cur != nil && cur.ctx.Err() == nil {
				t.Errorf("two leaders: candidate %d leads (token %v) while candidate %d's leadership (token %v) is live",
					who, token, cur.who, cur.token)
			}
			cur = tm
			terms = append(terms, token)
			mu.Unlock()
			if err := guard.Check("leadtest", token); err != nil {
				t.Errorf("candidate %d: fenced write as leader refused: %v", who, err)
			}
			select {
			case elected <- tm:
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

	stopped := errors.New("leadtest: stopped by the test")
	ctx, stop := context.WithCancelCause(context.Background())
	results := make(chan error, n)
	var wg sync.WaitGroup
	defer func() { stop(stopped); wg.Wait() }()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := leader.Run(ctx, c, fn(i), leader.WithLogger(log.With("candidate", i)))
			if ctx.Err() == nil {
				t.Errorf("candidate %d: leader.Run returned before the stop: %v", i, err)
			}
			results <- err
		}()
	}
	next := func(what string, d time.Duration) *term {
		t.Helper()
		select {
		case tm := <-elected:
			return tm
		case <-time.After(d):
			t.Fatalf("no leader within %v %s", d, what)
			return nil
		}
	}

	first := next("at the start", locktest.OpTimeout)
	close(first.stepDown)
	second := next("after the leader's fn returned", locktest.OpTimeout)
	if second.token <= first.token {
		t.Errorf("token %v after a step-down is not larger than %v", second.token, first.token)
	}

	cut := time.Now()
	clients[second.who].CutOff()
	third := next("after the leader was cut off", wait)
	took := time.Since(cut)
	if third.who == second.who {
		t.Fatalf("the cut-off candidate %d led again while cut off", second.who)
	}
	if err := second.ctx.Err(); err == nil {
		t.Errorf("the cut-off leader's fn context is live while candidate %d leads", third.who)
	} else if cause := context.Cause(second.ctx); !lost(cause) {
		t.Errorf("the cut-off leader's fn context ended with %v, want an ownership-loss cause", cause)
	}
	if took > lt.Max {
		t.Errorf("a new leader took over %v after the leader was cut off, later than LeaseTime.Max = %v", took, lt.Max)
	}
	t.Logf("cut-off leader replaced after %v", took.Round(time.Millisecond))
	clients[second.who].Heal()

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
	mu.Lock()
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Errorf("leadership %d's token %v is not larger than its predecessor's %v", i, terms[i], terms[i-1])
		}
	}
	mu.Unlock()
	if err := waitLeftovers(h, lock, wait); err != nil {
		t.Error(err)
	}
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
