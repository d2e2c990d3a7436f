package leader_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// backend is a lock of one backend, with the count of its entries left.
type backend struct {
	name string
	lock func(t *testing.T) (locktest.Client, func() int) // the lock, and its leftovers
}

// backends are memlock and ZooKeeper (a real server: zktest, every client
// on its own session behind its own fault proxy).
var backends = []backend{
	{name: "memlock", lock: func(t *testing.T) (locktest.Client, func() int) {
		m, srv := memLock(t)
		return memClient{m}, func() int { return srv.Entries("job") }
	}},
	{name: "ZooKeeper", lock: func(t *testing.T) (locktest.Client, func() int) {
		h := zkHarness(t)
		return h.NewClient(t, "job"), func() int {
			n, err := h.Leftovers(context.Background(), "job")
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}},
}

// memClient is a memlock lock as a locktest.Client; only the Lock is used.
type memClient struct{ recipe.Lock }

func (memClient) Crash()  { panic("not used") }
func (memClient) CutOff() { panic("not used") }
func (memClient) Heal()   { panic("not used") }

// zkHarness is the ZooKeeper harness of leadtest, on the shared ensemble.
func zkHarness(t *testing.T) *rtest.LockHarness {
	cl := zktest.Shared(t)
	return &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl),
		Lock: func(tb testing.TB, s *zookeeper.Session, dir string) recipe.Lock {
			m, err := mutex.New(s, dir)
			if err != nil {
				tb.Fatal(err)
			}
			return m
		}}
}

// termLog is one term as fn saw it.
type termLog struct {
	token      fence.Token
	start, end time.Time
}

// TestRequeuePauses: a fn that returns at once while leading (one unit of
// work per term) gives the lock up, and Run campaigns again only after the
// pause (the default's DefaultRequeuePause, also for the zero OnReturn, or
// Requeue's): each term starts
// at least the pause after the previous one returned, with a larger token.
// Lower bounds only: a loaded machine makes the gaps longer, never shorter.
func TestRequeuePauses(t *testing.T) {
	for _, b := range backends {
		for _, tc := range []struct {
			name  string
			pause time.Duration
			opts  []leader.Option
		}{
			{"default", leader.DefaultRequeuePause, nil},
			{"Requeue", 300 * time.Millisecond, []leader.Option{leader.WithOnReturn(leader.Requeue(300 * time.Millisecond))}},
			{"zero", leader.DefaultRequeuePause, []leader.Option{leader.WithOnReturn(leader.OnReturn{})}}, // the default, not Requeue(0)
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				lock, leftovers := b.lock(t)
				stopped := errors.New("stopped by the test")
				ctx, stop := context.WithCancelCause(context.Background())
				defer stop(nil)
				var terms []termLog
				err := leader.Run(ctx, lock, func(ctx context.Context, token fence.Token) error {
					terms = append(terms, termLog{token: token, start: time.Now()})
					if len(terms) == 3 {
						stop(stopped)
						<-ctx.Done()
					}
					terms[len(terms)-1].end = time.Now()
					return nil
				}, tc.opts...)
				if !errors.Is(err, stopped) || len(terms) != 3 {
					t.Fatalf("Run = %v after %d terms, want the stop's cause after 3", err, len(terms))
				}
				for i := 1; i < len(terms); i++ {
					if gap := terms[i].start.Sub(terms[i-1].end); gap < tc.pause {
						t.Errorf("term %d started %v after term %d returned, want at least %v", i+1, gap, i, tc.pause)
					}
					if terms[i].token <= terms[i-1].token {
						t.Errorf("term %d's token %v is not above term %d's %v", i+1, terms[i].token, i, terms[i-1].token)
					}
				}
				if n := leftovers(); n != 0 {
					t.Errorf("%d entries left after Run returned", n)
				}
			})
		}
	}
}

// TestStopEndsRun: with Stop, a fn that returns while leading ends Run
// after one term, the lock released: Run returns nil for nil, and fn's
// error, not logged, for an error.
func TestStopEndsRun(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			lock, leftovers := b.lock(t)
			var logged bytes.Buffer
			log := leader.WithLogger(slog.New(slog.NewTextHandler(&logged, nil)))
			for _, want := range []error{nil, errors.New("the job failed")} {
				terms := 0
				err := leader.Run(context.Background(), lock, func(context.Context, fence.Token) error {
					terms++
					return want
				}, log, leader.WithOnReturn(leader.Stop()))
				if err != want || terms != 1 {
					t.Errorf("Run = %v after %d terms, want %v after 1", err, terms, want)
				}
				if n := leftovers(); n != 0 {
					t.Errorf("%d entries left after Run returned", n)
				}
			}
			if logged.Len() != 0 {
				t.Errorf("Run logged:\n%s", &logged)
			}
		})
	}
}

// TestStopCampaignsAgainAfterLoss: on ZooKeeper, a leader cut off from the
// server sees fn's context end with an ownership-loss cause; that return
// is not early (the job did not finish while leading), so Run with Stop
// campaigns again once healed, and ends after the next term's fn returns.
func TestStopCampaignsAgainAfterLoss(t *testing.T) {
	h := zkHarness(t)
	c := h.NewClient(t, "job")
	var causes []error
	var tokens []fence.Token
	err := leader.Run(context.Background(), c, func(ctx context.Context, token fence.Token) error {
		tokens = append(tokens, token)
		if len(tokens) == 1 {
			c.CutOff()
			<-ctx.Done() // bounded by the session timeout (ConfTimeout)
			causes = append(causes, context.Cause(ctx))
			c.Heal()
			return ctx.Err()
		}
		return nil
	}, quiet, leader.WithOnReturn(leader.Stop()))
	if err != nil || len(tokens) != 2 || tokens[1] <= tokens[0] {
		t.Fatalf("Run = %v with terms of tokens %v, want nil after two terms, the second's token larger", err, tokens)
	}
	if !errors.Is(causes[0], recipe.ErrSuspended) && !errors.Is(causes[0], recipe.ErrSessionLost) {
		t.Errorf("the cut-off term ended with %v, want an ownership-loss cause", causes[0])
	}
	if n, err := h.Leftovers(context.Background(), "job"); n != 0 || err != nil {
		t.Errorf("%d entries (%v) left after Run returned", n, err)
	}
}

// TestStopCtxEnds: with Stop, Run stopped by its ctx returns the ctx's
// cause, not nil, even when fn returns nil.
func TestStopCtxEnds(t *testing.T) {
	m, _ := memLock(t)
	stopped := errors.New("stopped by the test")
	ctx, stop := context.WithCancelCause(context.Background())
	err := leader.Run(ctx, m, func(context.Context, fence.Token) error {
		stop(stopped) // fn's context ends on another goroutine, maybe later
		return nil
	}, leader.WithOnReturn(leader.Stop()))
	if !errors.Is(err, stopped) {
		t.Errorf("Run = %v, want the stop's cause", err)
	}
}

func TestNegativePause(t *testing.T) {
	m, _ := memLock(t)
	err := leader.Run(context.Background(), m, func(context.Context, fence.Token) error {
		t.Error("fn ran")
		return nil
	}, leader.WithOnReturn(leader.Requeue(-time.Second)))
	if !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Run with Requeue(-1s) = %v, want recipe.ErrBadOption", err)
	}
}
