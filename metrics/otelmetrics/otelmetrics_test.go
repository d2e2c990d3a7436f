package otelmetrics_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/metrics/otelmetrics"
)

// wantReader is what the SDK's in-memory reader holds after workload:
// one line per series, "name unit type{attributes} value" (a histogram's
// value is its count, and its bucket boundaries are checked apart).
const wantReader = `
zkrecipes.acquire.duration s histogram{kind=leader,path=scheduler,result=acquired} 1
zkrecipes.acquire.duration s histogram{kind=lock,path=/locks/otel,result=acquired} 1
zkrecipes.acquire.duration s histogram{kind=lock,path=delayed,result=acquired} 2
zkrecipes.acquire.duration s histogram{kind=lock,path=nightly,result=acquired} 3
zkrecipes.acquire.duration s histogram{kind=lock,path=nightly,result=failed} 1
zkrecipes.acquire.failures {acquisition} counter{kind=lock,path=nightly,reason=locked} 1
zkrecipes.acquire.started {acquisition} counter{kind=leader,path=scheduler} 1
zkrecipes.acquire.started {acquisition} counter{kind=lock,path=/locks/otel} 1
zkrecipes.acquire.started {acquisition} counter{kind=lock,path=delayed} 2
zkrecipes.acquire.started {acquisition} counter{kind=lock,path=nightly} 4
zkrecipes.fence.rejections {write} counter{resource=report} 1
zkrecipes.holding {grant} gauge{kind=leader,path=scheduler} 0
zkrecipes.holding {grant} gauge{kind=lock,path=/locks/otel} 0
zkrecipes.holding {grant} gauge{kind=lock,path=delayed} 0
zkrecipes.holding {grant} gauge{kind=lock,path=nightly} 0
zkrecipes.holding.token {token} gauge{kind=leader,path=scheduler} 0
zkrecipes.holding.token {token} gauge{kind=lock,path=/locks/otel} 0
zkrecipes.holding.token {token} gauge{kind=lock,path=delayed} 0
zkrecipes.holding.token {token} gauge{kind=lock,path=nightly} 0
zkrecipes.leading {term} updowncounter{path=scheduler} 0
zkrecipes.leases.lost {lease} counter{cause=session_closed,kind=lock,path=delayed} 1
zkrecipes.lock.delay s counter{kind=lock,path=delayed} true
zkrecipes.lock.delays {grant} counter{kind=lock,path=delayed} 1
zkrecipes.sequence.headroom {sequence} gauge{kind=lock,path=/locks/otel} 2147483647
zkrecipes.session.transitions {transition} counter{state=CONNECTED} 1
zkrecipes.session.transitions {transition} counter{state=LOST} 1
zkrecipes.sessions {session} updowncounter{state=CONNECTED} 0
zkrecipes.waiters {waiter} updowncounter{kind=lock,path=nightly} 0
`

// TestInstruments runs real acquisitions, a leader term, a fence rejection
// and a ZooKeeper session through the adapter on an SDK provider with a
// ManualReader, and checks every instrument's name, unit, kind, attributes
// and value, the histogram's boundaries, and the meter's scope.
func TestInstruments(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := otelmetrics.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	workload(t, m)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.Name != otelmetrics.ScopeName {
		t.Fatalf("scopes %+v, want one: %s", rm.ScopeMetrics, otelmetrics.ScopeName)
	}
	got := render(t, rm.ScopeMetrics[0].Metrics)
	if got != strings.TrimSpace(wantReader) {
		t.Errorf("the reader holds:\n%s\nwant:\n%s", got, strings.TrimSpace(wantReader))
	}
}

// render writes the series of ms as wantReader does, sorted, and checks
// every histogram's boundaries and every instrument's description.
func render(t *testing.T, ms []metricdata.Metrics) string {
	t.Helper()
	var lines []string
	add := func(m metricdata.Metrics, typ string, set attribute.Set, v any) {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		lines = append(lines, fmt.Sprintf("%s %s %s{%s} %v", m.Name, m.Unit, typ, strings.Join(kv, ","), v))
	}
	for _, m := range ms {
		if m.Description == "" {
			t.Errorf("%s has no description", m.Name)
		}
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			typ := "updowncounter"
			if d.IsMonotonic {
				typ = "counter"
			}
			if d.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: temporality %v", m.Name, d.Temporality)
			}
			for _, p := range d.DataPoints {
				add(m, typ, p.Attributes, p.Value)
			}
		case metricdata.Sum[float64]: // seconds of lock-delay: a time, so only its sign
			for _, p := range d.DataPoints {
				add(m, "counter", p.Attributes, p.Value > 0)
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				add(m, "gauge", p.Attributes, p.Value)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				if !slices.Equal(p.Bounds, otelmetrics.DefaultBuckets) {
					t.Errorf("%s: bounds %v, want DefaultBuckets", m.Name, p.Bounds)
				}
				add(m, "histogram", p.Attributes, p.Count)
			}
		default:
			t.Errorf("%s: unexpected data %T", m.Name, m.Data)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestOptions: WithoutPathAttribute records every directory under
// path="", WithAttributes adds its attributes to every measurement, and
// WithBuckets sets the histogram's boundaries.
func TestOptions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := otelmetrics.New(mp, otelmetrics.WithoutPathAttribute(), otelmetrics.WithBuckets([]float64{1, 2}),
		otelmetrics.WithAttributes(attribute.String("ensemble", "east")))
	if err != nil {
		t.Fatal(err)
	}
	m.AcquireStarted("lock", "/a")
	m.AcquireStarted("lock", "/b")
	m.AcquireDone("lock", "/a", 0, nil)
	m.Leading("scheduler", +1)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ms := range rm.ScopeMetrics[0].Metrics {
		switch d := ms.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				got = append(got, fmt.Sprintf("%s %s %d", ms.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				got = append(got, fmt.Sprintf("%s %s %v", ms.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Bounds))
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"zkrecipes.acquire.duration ensemble=east,kind=lock,path=,result=acquired [1 2]",
		"zkrecipes.acquire.started ensemble=east,kind=lock,path= 2",
		"zkrecipes.leading ensemble=east,path= 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestResourceAttribute: by default each fenced resource's name is an
// attribute value; WithoutResourceAttribute records every rejection under
// resource="", and WithResourceAttribute under the bucket its function
// names.
func TestResourceAttribute(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  otelmetrics.Option
		want []string
	}{
		{"default", nil, []string{"resource=invoice/cust-4711/alice@example.com 1", "resource=invoice/cust-4712/bob@example.com 1", "resource=report 1"}},
		{"without", otelmetrics.WithoutResourceAttribute(), []string{"resource= 3"}},
		{"bucket", otelmetrics.WithResourceAttribute(func(name string) string { first, _, _ := strings.Cut(name, "/"); return first }),
			[]string{"resource=invoice 2", "resource=report 1"}},
	} {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		m, err := otelmetrics.New(mp, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"invoice/cust-4711/alice@example.com", "invoice/cust-4712/bob@example.com", "report"} {
			m.StaleRejected(&fence.StaleError{Resource: r, Token: 1, Highest: 2})
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ms := range rm.ScopeMetrics[0].Metrics {
			if d, ok := ms.Data.(metricdata.Sum[int64]); ok && ms.Name == "zkrecipes.fence.rejections" {
				for _, p := range d.DataPoints {
					got = append(got, fmt.Sprintf("%s %d", p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		_ = mp.Shutdown(context.Background())
	}
}
