// Package promtest holds the helpers of the tests that scrape package
// prommetrics's adapter wired to a backend: a registry with the adapter,
// the value of a family, and the comparison of a scrape with the samples a
// test expects, under the HELP and TYPE lines a user sees, written once
// here.
package promtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
)

// families holds the TYPE and HELP of every family of prommetrics.Metrics that
// the tests compare, as a scrape must show them.
var families = map[string][2]string{
	"zkrecipes_acquire_started_total": {"counter", "Acquisitions (Acquire, TryAcquire, Campaign) started."},
	"zkrecipes_acquire_failures_total": {"counter", "Acquisitions that ended without a grant, by reason " +
		"(locked: TryAcquire found it held; canceled, deadline: the caller gave up)."},
	"zkrecipes_waiters":                   {"gauge", "Contenders of this process currently queued behind other holders."},
	"zkrecipes_leases_lost_total":         {"counter", "Granted leases that ended without their own Release, by cause."},
	"zkrecipes_leading":                   {"gauge", "Terms of leader.Run that this process leads now, by name."},
	"zkrecipes_holding":                   {"gauge", "Grants of this process's Acquire and TryAcquire live now (held, not yet released or lost)."},
	"zkrecipes_holding_token":             {"gauge", "The largest fencing token among the live grants of zkrecipes_holding (exact up to 2^53); 0 when none."},
	"zkrecipes_sessions":                  {"gauge", "Open sessions of this process per connection state (CONNECTED, SUSPENDED, RECONNECTED, LOST)."},
	"zkrecipes_session_transitions_total": {"counter", "Connection-state transitions, by the state entered."},
	"zkrecipes_fence_rejections_total":    {"counter", "Writes a fence rejected because their token was stale (a fence.Guard or any fence of resource/ wired with OnStale)."},
}

// New returns a prommetrics.Metrics with default options and a pedantic
// registry it is registered with.
func New() (*prommetrics.Metrics, *prometheus.Registry) {
	m := prommetrics.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	return m, reg
}

// Compare gathers g and returns an error unless the families named in
// samples hold exactly those samples and the families absent have no
// series. samples are exposition lines `name{labels} value` (blank lines
// are ignored); each family is compared with its HELP and TYPE lines from
// families too.
func Compare(g prometheus.Gatherer, samples string, absent ...string) error {
	names := slices.Clone(absent)
	byName := map[string][]string{}
	for line := range strings.Lines(samples) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if _, ok := families[name]; !ok {
			return fmt.Errorf("promtest: no HELP and TYPE for %s", name)
		}
		if slices.Contains(absent, name) {
			return fmt.Errorf("promtest: %s has samples and is said absent", name)
		}
		if byName[name] == nil {
			names = append(names, name)
		}
		byName[name] = append(byName[name], line)
	}
	var want strings.Builder
	for name, lines := range byName {
		f := families[name]
		fmt.Fprintf(&want, "# HELP %s %s\n# TYPE %s %s\n%s\n", name, f[1], name, f[0], strings.Join(lines, "\n"))
	}
	return testutil.GatherAndCompare(g, strings.NewReader(want.String()), names...)
}

// Value returns the value of the only series of the gauge or counter
// family name (0 while it has none), and fails the test if it has several.
func Value(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("%s has %d series", name, len(mf.GetMetric()))
		}
		if gauge := mf.GetMetric()[0].GetGauge(); gauge != nil {
			return gauge.GetValue()
		}
		return mf.GetMetric()[0].GetCounter().GetValue()
	}
	return 0
}
