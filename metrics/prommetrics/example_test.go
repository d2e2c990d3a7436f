package prommetrics_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Wire the metrics hook: register the adapter, install it on the Session
// (every recipe on it reports), and on the resource's fence.Guard. Serve
// the registry with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func Example() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := prommetrics.New()
	reg.MustRegister(m)

	s, err := zookeeper.Connect(ctx, zktest.ExampleServers(), zookeeper.WithMetrics(m))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	var guard fence.Guard
	guard.OnStale = m.StaleRejected

	mu, _ := mutex.New(s, "/locks/nightly")
	lease, err := mu.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	guard.Check("report", lease.Token())
	guard.Check("report", lease.Token()-1) // a stale holder's write: rejected and counted
	lease.Release(ctx)

	n, _ := testutil.GatherAndCount(reg, "zkrecipes_acquire_started_total", "zkrecipes_fence_rejections_total")
	fmt.Println(n, "series")
	// Output: 2 series
}

// The same adapter for any other backend and for leader.Run: here memlock
// (in memory) with its WithMetrics, and leader.WithMetrics, both reporting
// to one Metrics. etcdlock, pglock and redislock take WithMetrics(m) in
// their Connect the same way.
func Example_leader() {
	reg := prometheus.NewRegistry()
	m := prommetrics.New()
	reg.MustRegister(m)

	srv, err := memlock.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	s := srv.Connect(memlock.WithMetrics(m))
	defer s.Close()
	lock, _ := memlock.New(s, "scheduler")

	ctx, stop := context.WithCancel(context.Background())
	leader.Run(ctx, lock, func(ctx context.Context, _ fence.Token) error {
		stop() // one term, then the service shuts down
		return nil
	}, leader.WithMetrics(m, "scheduler"))

	// zkrecipes_acquire_started_total{kind="leader",path="scheduler"} and
	// {kind="lock",path="scheduler"}, zkrecipes_leading{path="scheduler"}
	n, _ := testutil.GatherAndCount(reg, "zkrecipes_acquire_started_total", "zkrecipes_leading")
	fmt.Println(n, "series")
	// Output: 3 series
}
