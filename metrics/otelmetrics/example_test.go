package otelmetrics_test

import (
	"context"
	"fmt"
	"slices"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/metrics/otelmetrics"
)

// Wire the metrics hook to OpenTelemetry: one Metrics on the backend's
// session (here memlock, in memory; zookeeper.WithMetrics, etcdlock,
// pglock and redislock's WithMetrics alike), on leader.Run and on the
// resource's fence.Guard. A service passes its own MeterProvider (an OTLP
// exporter behind a PeriodicReader, say); the ManualReader here shows
// what it collects.
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	m, err := otelmetrics.New(mp)
	if err != nil {
		fmt.Println(err)
		return
	}

	srv, err := memlock.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	s := srv.Connect(memlock.WithMetrics(m))
	defer s.Close()
	lock, _ := memlock.New(s, "scheduler")
	var guard fence.Guard
	guard.OnStale = m.StaleRejected

	rctx, stop := context.WithCancel(ctx)
	leader.Run(rctx, lock, func(ctx context.Context, token fence.Token) error {
		guard.Check("report", token+1) // a newer holder's write, then ours, late:
		guard.Check("report", token)   // rejected and counted
		stop()                         // one term, then the service shuts down
		<-ctx.Done()
		return nil
	}, leader.WithMetrics(m, "scheduler"))

	var rm metricdata.ResourceMetrics
	reader.Collect(ctx, &rm)
	var names []string
	for _, sm := range rm.ScopeMetrics {
		for _, ms := range sm.Metrics {
			names = append(names, ms.Name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// zkrecipes.acquire.duration
	// zkrecipes.acquire.started
	// zkrecipes.fence.rejections
	// zkrecipes.holding
	// zkrecipes.holding.token
	// zkrecipes.leading
}
