package prommetrics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics/promtest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// afterAcquisitions is the scrape TestMetricsFromRealAcquisitions expects
// before the Close.
const afterAcquisitions = `
zkrecipes_acquire_failures_total{kind="lock",path="/locks/prom",reason="locked"} 1
zkrecipes_acquire_started_total{kind="lock",path="/locks/prom"} 3
zkrecipes_fence_rejections_total{resource="report"} 1
zkrecipes_leases_lost_total{cause="node_deleted",kind="lock",path="/locks/prom"} 1
zkrecipes_sessions{state="CONNECTED"} 1
zkrecipes_waiters{kind="lock",path="/locks/prom"} 0
`

// TestMetricsFromRealAcquisitions registers the adapter with a real
// registry and checks what a scrape shows after a grant, a TryAcquire that
// finds the lock held, a queued waiter, a holder whose node an operator
// deleted, a stale write rejected by a Guard, and the session's Close.
func TestMetricsFromRealAcquisitions(t *testing.T) {
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	m, reg := promtest.New()
	s := rtest.Connect(t, cl, zookeeper.WithMetrics(m))
	mu, err := mutex.New(s, "/locks/prom")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	a, err := mu.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mu.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	ch := rtest.Async(ctx, mu.Acquire)
	serverkit.Eventually(t, 10*time.Second, "a waiter in zkrecipes_waiters", func() bool {
		return promtest.Value(t, reg, "zkrecipes_waiters") == 1
	})
	// Three creates in a fresh directory (the holder's, TryAcquire's, the
	// waiter's): sequences 0 to 2.
	if got := promtest.Value(t, reg, "zkrecipes_sequence_headroom"); got != math.MaxInt32-2 {
		t.Fatalf("zkrecipes_sequence_headroom %v after the third create, want %d", got, math.MaxInt32-2)
	}
	ps, err := mu.Participants(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("participants: %v, %v", ps, err)
	}
	in.Delete("/locks/prom/" + ps[0].Name)
	r := rtest.Await(t, ch, 10*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	<-a.Context().Done()
	var guard fence.Guard
	guard.OnStale = m.StaleRejected
	guard.Check("report", r.Lease.Token())
	if err := guard.Check("report", a.Token()); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale check: %v", err)
	}

	if err := promtest.Compare(reg, afterAcquisitions); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m, "zkrecipes_acquire_duration_seconds"); n != 2 {
		t.Fatalf("acquire duration series: %d, want 2 (acquired, failed)", n)
	}

	if err := r.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	want := `
zkrecipes_sessions{state="CONNECTED"} 0
zkrecipes_session_transitions_total{state="CONNECTED"} 1
zkrecipes_session_transitions_total{state="LOST"} 1
`
	if err := promtest.Compare(reg, want); err != nil {
		t.Fatal(err)
	}
}

// TestReason names every sentinel the labels use.
func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		recipe.ErrLocked: "locked", context.Canceled: "canceled", context.DeadlineExceeded: "deadline",
		recipe.ErrSuspended: "suspended", recipe.ErrSessionLost: "session_lost",
		recipe.ErrSessionClosed: "session_closed", recipe.ErrNodeDeleted: "node_deleted",
		recipe.ErrLeaseLost: "lease_lost", &recipe.OpError{Op: "create", Err: zkNoAuth{}}: "other",
		recipe.ErrBadOption: "bad_option", zookeeper.ErrSequenceLimit: "sequence_limit", errors.New("x"): "other",
		// Wrapped as the backends return them.
		fmt.Errorf("%w: /locks/a holds x", zookeeper.ErrSequenceLimit):                           "sequence_limit",
		&recipe.OpError{Op: "create", Err: fmt.Errorf("%w: anchor", zookeeper.ErrSequenceLimit)}: "sequence_limit",
		errors.Join(errors.New("a"), zookeeper.ErrSequenceLimit):                                 "sequence_limit",
		errors.New(zookeeper.ErrSequenceLimit.Error() + " (and more)"):                           "other",
	} {
		if got := prommetrics.Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

// Metrics is ZooKeeper's SequenceMetrics too (checked here: the package
// itself imports no ZooKeeper client).
var _ zookeeper.SequenceMetrics = (*prommetrics.Metrics)(nil)

type zkNoAuth struct{}

func (zkNoAuth) Error() string { return "boom" }

// TestSessionsGaugeThroughLossAndClose: a session cut off past its timeout
// moves from CONNECTED through SUSPENDED to LOST in zkrecipes_sessions, and
// leaves the gauge when it is closed while still LOST.
func TestSessionsGaugeThroughLossAndClose(t *testing.T) {
	cl := zktest.Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	m, reg := promtest.New()
	s := rtest.Connect(t, cl, zookeeper.WithMetrics(m), zookeeper.WithDialer(p.Dial), zookeeper.WithSessionTimeout(time.Second))
	p.Blackhole()
	serverkit.Eventually(t, 10*time.Second, "LOST", func() bool { return s.State() == recipe.StateLost })
	want := `
zkrecipes_sessions{state="CONNECTED"} 0
zkrecipes_sessions{state="LOST"} 1
zkrecipes_sessions{state="SUSPENDED"} 0
`
	if err := promtest.Compare(reg, want); err != nil {
		t.Fatal(err)
	}
	s.Close()
	want = strings.Replace(want, `{state="LOST"} 1`, `{state="LOST"} 0`, 1)
	if err := promtest.Compare(reg, want); err != nil {
		t.Fatal(err)
	}
}

// TestResourceLabel: by default each fenced resource's name is a label
// value; WithoutResourceLabel counts every rejection under resource="",
// and WithResourceLabel under the bucket its function names.
func TestResourceLabel(t *testing.T) {
	reject := func(m *prommetrics.Metrics) {
		for _, r := range []string{"invoice/cust-4711/alice@example.com", "invoice/cust-4712/bob@example.com", "report"} {
			m.StaleRejected(&fence.StaleError{Resource: r, Token: 1, Highest: 2})
		}
	}
	head := "# HELP zkrecipes_fence_rejections_total Writes a fence rejected because their token was stale (a fence.Guard or any fence of resource/ wired with OnStale).\n" +
		"# TYPE zkrecipes_fence_rejections_total counter\n"
	for _, c := range []struct {
		name string
		opt  prommetrics.Option
		want string
	}{
		{"default", nil, `zkrecipes_fence_rejections_total{resource="invoice/cust-4711/alice@example.com"} 1
zkrecipes_fence_rejections_total{resource="invoice/cust-4712/bob@example.com"} 1
zkrecipes_fence_rejections_total{resource="report"} 1
`},
		{"without", prommetrics.WithoutResourceLabel(), `zkrecipes_fence_rejections_total{resource=""} 3
`},
		{"bucket", prommetrics.WithResourceLabel(func(name string) string { first, _, _ := strings.Cut(name, "/"); return first }),
			`zkrecipes_fence_rejections_total{resource="invoice"} 2
zkrecipes_fence_rejections_total{resource="report"} 1
`},
	} {
		m := prommetrics.New(c.opt)
		reject(m)
		if err := testutil.CollectAndCompare(m, strings.NewReader(head+c.want), "zkrecipes_fence_rejections_total"); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestHolding: a scrape shows the grants this process holds and the
// largest of their tokens (two leases of a semaphore), and zero for both
// once they are released or lost.
func TestHolding(t *testing.T) {
	cl := zktest.Shared(t)
	m, reg := promtest.New()
	s := rtest.Connect(t, cl, zookeeper.WithMetrics(m))
	sem, err := mutex.NewSemaphore(s, "/locks/holding", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(n int, token fence.Token) string {
		return fmt.Sprintf("zkrecipes_holding{kind=\"lease\",path=\"/locks/holding\"} %d\nzkrecipes_holding_token{kind=\"lease\",path=\"/locks/holding\"} %d\n", n, token)
	}
	check := func(want string) {
		t.Helper()
		if err := promtest.Compare(reg, want); err != nil {
			t.Fatal(err)
		}
	}
	check(scrape(2, max(a.Token(), b.Token())))
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	check(scrape(1, a.Token()))
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	check(scrape(0, 0))
}
