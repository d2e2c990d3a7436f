package otelmetrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/metrics/otelmetrics"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// tee reports every event to both adapters.
type tee struct {
	p *prommetrics.Metrics
	o *otelmetrics.Metrics
}

func (t tee) AcquireStarted(kind, dir string) {
	t.p.AcquireStarted(kind, dir)
	t.o.AcquireStarted(kind, dir)
}
func (t tee) AcquireDone(kind, dir string, took time.Duration, err error) {
	t.p.AcquireDone(kind, dir, took, err)
	t.o.AcquireDone(kind, dir, took, err)
}
func (t tee) Waiting(kind, dir string, delta int) {
	t.p.Waiting(kind, dir, delta)
	t.o.Waiting(kind, dir, delta)
}
func (t tee) LeaseLost(kind, dir string, cause error) {
	t.p.LeaseLost(kind, dir, cause)
	t.o.LeaseLost(kind, dir, cause)
}
func (t tee) SessionState(from, to recipe.ConnState, cause error) {
	t.p.SessionState(from, to, cause)
	t.o.SessionState(from, to, cause)
}
func (t tee) StaleRejected(e *fence.StaleError) { t.p.StaleRejected(e); t.o.StaleRejected(e) }
func (t tee) Leading(name string, delta int)    { t.p.Leading(name, delta); t.o.Leading(name, delta) }
func (t tee) LockDelayServed(kind, dir string, d time.Duration) {
	t.p.LockDelayServed(kind, dir, d)
	t.o.LockDelayServed(kind, dir, d)
}
func (t tee) SequenceHeadroom(kind, dir string, remaining int64) {
	t.p.SequenceHeadroom(kind, dir, remaining)
	t.o.SequenceHeadroom(kind, dir, remaining)
}

// TestSameAsPrometheusAdapter: the same events through prommetrics, and through
// otelmetrics exported by OpenTelemetry's Prometheus exporter, scrape alike:
// the same family names, HELP, TYPE, label sets and values (histogram
// buckets, counts and sums included), so that prommetrics's dashboards and
// alerts (docs/metrics.md) work on either.
func TestSameAsPrometheusAdapter(t *testing.T) {
	pm := prommetrics.New()
	preg := prometheus.NewPedanticRegistry()
	preg.MustRegister(pm)

	oreg := prometheus.NewPedanticRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(oreg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(t.Context())
	om, err := otelmetrics.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	workload(t, tee{pm, om})

	want, got := scrape(t, preg), scrape(t, oreg)
	if got != want {
		t.Errorf("otelmetrics through the Prometheus exporter:\n%s\nzkprom:\n%s", got, want)
	}
	if !strings.Contains(want, "zkrecipes_acquire_duration_seconds_bucket") || !strings.Contains(want, "zkrecipes_sequence_headroom") ||
		!strings.Contains(want, "zkrecipes_lock_delay_seconds_total") {
		t.Errorf("the workload did not reach every family:\n%s", want)
	}
}

// scrape returns the text exposition of g's families.
func scrape(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
