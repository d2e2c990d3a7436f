package zookeeper_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestSequenceLimitLatch: leader latches joining across the limit: exactly
// one leader at every sample, the first to join; when it leaves, the next
// in creation order leads, and Leader (Head) names it.
func TestSequenceLimitLatch(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	const dir = "/limit/latch"
	cl := limitCluster(t, 1, dir)
	in := zktest.Inspect(t, cl)
	const n = 5
	ls := make([]*latch.Latch, n)
	for i := range ls {
		l, err := latch.New(rtest.Connect(t, cl), dir, fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		serverkit.Eventually(t, 10*time.Second, "the latch's node", func() bool { return len(in.Children(dir)) == i+1 })
		ls[i] = l
	}
	if got := stuckCount(t, in, dir); got < 3 {
		t.Fatalf("%d nodes with sequence 2147483647, want 4 (children %v)", got, in.Children(dir))
	}
	for leader := range n {
		serverkit.Eventually(t, 10*time.Second, fmt.Sprintf("p%d leads", leader), func() bool { return ls[leader].IsLeader() })
		for range 50 { // about half a second of samples
			var leading []int
			for i := leader; i < n; i++ {
				if ls[i].IsLeader() {
					leading = append(leading, i)
				}
			}
			if !slices.Equal(leading, []int{leader}) {
				t.Fatalf("leaders %v, want exactly p%d", leading, leader)
			}
			time.Sleep(10 * time.Millisecond)
		}
		p, err := ls[leader].Leader(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := ls[leader].ID(); !strings.Contains(string(p.Data), want) {
			t.Fatalf("Leader names %q, want %s", p.Data, want)
		}
		ps, err := ls[leader].Participants(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		checkCreationOrder(t, ps)
		if err := ls[leader].Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSequenceLimitElection: candidates campaigning across the limit lead
// in creation order; Leader and Participants agree.
func TestSequenceLimitElection(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	const dir = "/limit/election"
	cl := limitCluster(t, 1, dir)
	in := zktest.Inspect(t, cl)
	const n = 6
	es := make([]*election.Election, n)
	acq := make([]func(context.Context) (recipe.Lease, error), n)
	for i := range es {
		e, err := election.New(rtest.Connect(t, cl), dir)
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
		v := []byte(fmt.Sprintf("c%d", i))
		acq[i] = func(ctx context.Context) (recipe.Lease, error) { return e.Campaign(ctx, v) }
	}
	chs := queueUp(t, in, dir, 0, acq)
	if got := stuckCount(t, in, dir); got < 2 {
		t.Fatalf("%d nodes with sequence 2147483647, want 5 (children %v)", got, in.Children(dir))
	}
	for i, ch := range chs {
		r := rtest.Await(t, ch, 10*time.Second)
		if r.Err != nil {
			t.Fatalf("c%d: %v", i, r.Err)
		}
		noneGranted(t, 100*time.Millisecond, fmt.Sprintf("while c%d leads", i), chs[i+1:]...)
		l, err := es[(i+1)%n].Leader(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("c%d", i); string(l.Value) != want {
			t.Fatalf("Leader is %q, want %s", l.Value, want)
		}
		ps, err := es[i].Participants(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		checkCreationOrder(t, ps)
		if err := r.Lease.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// seqMetrics records SequenceHeadroom calls (the other recipe.Metrics methods do
// nothing).
type seqMetrics struct {
	mu        sync.Mutex
	headrooms []int64
}

func (*seqMetrics) AcquireStarted(string, string) {}

func (*seqMetrics) AcquireDone(string, string, time.Duration, error) {}

func (*seqMetrics) Waiting(string, string, int) {}

func (*seqMetrics) LeaseLost(string, string, error) {}

func (*seqMetrics) SessionState(recipe.ConnState, recipe.ConnState, error) {}

func (*seqMetrics) StaleRejected(*fence.StaleError) {}

func (m *seqMetrics) SequenceHeadroom(kind, dir string, remaining int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headrooms = append(m.headrooms, remaining)
}

// warnings is a slog handler that keeps the messages of WARN records.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }

func (w *warnings) WithGroup(string) slog.Handler { return w }

// TestSequenceLimitWarns: a Session reports the directory's headroom after
// each create, and warns once near the limit and once at it.
func TestSequenceLimitWarns(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	const dir = "/limit/warn"
	cl := limitCluster(t, 2, dir)
	m, w := &seqMetrics{}, &warnings{}
	s := rtest.Connect(t, cl, zookeeper.WithMetrics(m), zookeeper.WithLogger(slog.New(w)))
	mu, err := mutex.New(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l, err := mu.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	got := slices.Clone(m.headrooms)
	m.mu.Unlock()
	// 2 for the first create, 0 once at the limit.
	if len(got) != 5 || got[0] != 2 || got[4] != 0 {
		t.Fatalf("headrooms %v, want 5 values from 2 down to 0", got)
	}
	w.mu.Lock()
	msgs := slices.Clone(w.msgs)
	w.mu.Unlock()
	near, at := 0, 0
	for _, msg := range msgs {
		switch {
		case strings.Contains(msg, "near its limit"):
			near++
		case strings.Contains(msg, "at its limit"):
			at++
		}
	}
	if near != 1 || at != 1 {
		t.Fatalf("warnings %q: want one near the limit and one at it", msgs)
	}
}

// TestSequenceLimitSemaphoreOrder: a two-lease semaphore whose waiters
// queued across the limit grants them in creation order as leases free.
func TestSequenceLimitSemaphoreOrder(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	const dir = "/limit/sem"
	cl := limitCluster(t, 2, dir)
	in := zktest.Inspect(t, cl)
	const n = 6
	acq := make([]func(context.Context) (recipe.Lease, error), n)
	for i := range acq {
		s, err := mutex.NewSemaphore(rtest.Connect(t, cl), dir, 2)
		if err != nil {
			t.Fatal(err)
		}
		acq[i] = s.Acquire
	}
	chs := queueUp(t, in, dir, 0, acq) // 2147483645, 2147483646, then 2147483647 four times
	if got := stuckCount(t, in, dir); got < 3 {
		t.Fatalf("%d nodes with sequence 2147483647, want 4 (children %v)", got, in.Children(dir))
	}
	held := []recipe.Lease{rtest.Await(t, chs[0], 10*time.Second).Lease, rtest.Await(t, chs[1], 10*time.Second).Lease}
	for i := 2; i < n; i++ {
		noneGranted(t, 100*time.Millisecond, fmt.Sprintf("before lease %d frees", i-2), chs[i:]...)
		if err := held[0].Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := rtest.Await(t, chs[i], 10*time.Second)
		if r.Err != nil {
			t.Fatalf("waiter %d: %v", i, r.Err)
		}
		held = append(held[1:], r.Lease)
	}
	for _, l := range held {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
