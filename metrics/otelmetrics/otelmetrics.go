// Package otelmetrics exports the events of this repository's sessions, locks
// and leader loops (the recipe.Metrics hook) as OpenTelemetry metrics, on
// any metric.MeterProvider. It is the OpenTelemetry twin of recipe/prommetrics,
// with the same instruments, and a module of its own
// (github.com/zkrecipes/zkrecipes/metrics/otelmetrics), so that no other user of
// the library requires OpenTelemetry. It works for every backend
// (ZooKeeper, etcd, PostgreSQL, Redis, memlock) and for leader.Run, and
// links none of their clients. Install one Metrics with each backend's
// WithMetrics and with leader.WithMetrics:
//
//	m, err := otelmetrics.New(provider) // nil: otel.GetMeterProvider()
//	if err != nil { return err }
//	s, err := zookeeper.Connect(ctx, servers, zookeeper.WithMetrics(m))
//	// or etcdlock.Connect(ctx, url, etcdlock.WithMetrics(m)), pglock.Connect,
//	// redislock.Connect (the same option), srv.Connect(memlock.WithMetrics(m))
//	...
//	err = leader.Run(ctx, lock, fn, leader.WithMetrics(m, "scheduler"))
//	guard.OnStale = m.StaleRejected // a fence at the resource: fence.Guard, fencesql, fencezk, fenceetcd, fenceredis
//
// The instruments (meter ScopeName; kind and path are the kind and dir of
// recipe.Metrics, as prommetrics's labels; each name becomes prommetrics's through
// OpenTelemetry's Prometheus translation: dots to underscores, _seconds
// for the unit s, _total for a counter):
//
//	zkrecipes.acquire.started      Int64Counter        {acquisition} kind, path
//	zkrecipes.acquire.duration     Float64Histogram    s             kind, path, result (acquired | failed)
//	zkrecipes.acquire.failures     Int64Counter        {acquisition} kind, path, reason
//	zkrecipes.waiters              Int64UpDownCounter  {waiter}      kind, path
//	zkrecipes.leases.lost          Int64Counter        {lease}       kind, path, cause
//	zkrecipes.leading              Int64UpDownCounter  {term}        path
//	zkrecipes.holding              Int64Gauge          {grant}       kind, path
//	zkrecipes.holding.token        Int64Gauge          {token}       kind, path
//	zkrecipes.sessions             Int64UpDownCounter  {session}     state
//	zkrecipes.session.transitions  Int64Counter        {transition}  state
//	zkrecipes.fence.rejections     Int64Counter        {write}       resource
//	zkrecipes.sequence.headroom    Int64Gauge          {sequence}    kind, path
//	zkrecipes.lock.delays          Int64Counter        {grant}       kind, path
//	zkrecipes.lock.delay           Float64Counter      s             kind, path
//
// Attributes carry no secret of the library's: reason and cause are words
// of a closed list (prommetrics.Reason's), never an error's text. But path and
// resource carry whatever the application names its locks and fenced
// resources, verbatim: one series per distinct name, and any personal data
// in a name ends up in the metrics backend. Keep them few, stable and free
// of personal data (not one per request, row or customer), or drop them:
// WithoutPathAttribute, WithoutResourceAttribute (or bucket the resource
// with WithResourceAttribute).
package otelmetrics

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/holding"
	"github.com/zkrecipes/zkrecipes/internal/metricreason"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ScopeName is the instrumentation scope (the meter's name) of every
// instrument.
const ScopeName = "github.com/zkrecipes/zkrecipes/metrics/otelmetrics"

// DefaultBuckets are zkrecipes.acquire.duration's explicit bucket
// boundaries, in seconds: prommetrics.DefaultBuckets, from 1 ms (an uncontended
// grant on a local ensemble) to 5 minutes (a waiter behind long holders).
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics implements recipe.Metrics by recording OpenTelemetry
// instruments; also leader.LeadingMetrics and ZooKeeper's SequenceMetrics.
// One Metrics can serve many sessions of any backends and many leader
// loops at once. It is safe for concurrent use, and its methods never block
// (they only record into the SDK's in-memory aggregation).
type Metrics struct {
	noPath   bool
	resource func(string) string  // WithResourceAttribute; nil: the resource's name
	attrs    []attribute.KeyValue // WithAttributes

	started     metric.Int64Counter
	duration    metric.Float64Histogram
	failures    metric.Int64Counter
	waiters     metric.Int64UpDownCounter
	lost        metric.Int64Counter
	leading     metric.Int64UpDownCounter
	holding     metric.Int64Gauge
	holdToken   metric.Int64Gauge
	holds       holding.Set
	sessions    metric.Int64UpDownCounter
	transitions metric.Int64Counter
	rejections  metric.Int64Counter
	headroom    metric.Int64Gauge
	delays      metric.Int64Counter
	delayed     metric.Float64Counter
}

var _ recipe.Metrics = (*Metrics)(nil)
var _ leader.LeadingMetrics = (*Metrics)(nil)
var _ recipe.DelayMetrics = (*Metrics)(nil)
var _ recipe.HoldingMetrics = (*Metrics)(nil)

type config struct {
	buckets  []float64
	noPath   bool
	resource func(string) string
	attrs    []attribute.KeyValue
}

// Option configures New.
type Option func(*config)

// WithBuckets sets the explicit bucket boundaries (in seconds) of
// zkrecipes.acquire.duration (default DefaultBuckets; a View of the
// provider overrides them).
func WithBuckets(b []float64) Option { return func(c *config) { c.buckets = b } }

// WithoutPathAttribute records every recipe directory under path="" (for
// processes that use many lock directories, to bound the number of series).
func WithoutPathAttribute() Option { return func(c *config) { c.noPath = true } }

// WithoutResourceAttribute records every fence rejection under
// resource="" (for resources named per row or per customer, whose names
// would make one series each and may be personal data).
func WithoutResourceAttribute() Option {
	return WithResourceAttribute(func(string) string { return "" })
}

// WithResourceAttribute records a fence rejection of the resource named
// name under resource=f(name): a bucket of few, stable values (say the
// name's first segment: "invoice/cust-4711/..." to "invoice"). f must be
// fast and safe for concurrent use; nil restores the default (the name).
func WithResourceAttribute(f func(name string) string) Option {
	return func(c *config) { c.resource = f }
}

// WithAttributes adds constant attributes to every measurement (e.g. the
// ensemble's name when a process talks to several): prommetrics's
// WithConstLabels. Prefer resource attributes for what describes the
// process.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, kv...) }
}

// New returns a Metrics whose instruments come from mp's meter ScopeName
// (mp nil: otel.GetMeterProvider(), the global provider). It returns an
// error if the provider refuses an instrument.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	c := config{buckets: DefaultBuckets}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	mt := mp.Meter(ScopeName)
	m := &Metrics{noPath: c.noPath, resource: c.resource, attrs: c.attrs}
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, err := mt.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		check(err)
		return i
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		i, err := mt.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		check(err)
		return i
	}
	var err error
	m.started = counter("zkrecipes.acquire.started", "{acquisition}",
		"Acquisitions (Acquire, TryAcquire, Campaign) started.")
	m.duration, err = mt.Float64Histogram("zkrecipes.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an acquisition to its grant (result=acquired) or its failure (result=failed), waiting included."),
		metric.WithExplicitBucketBoundaries(c.buckets...))
	check(err)
	m.failures = counter("zkrecipes.acquire.failures", "{acquisition}",
		"Acquisitions that ended without a grant, by reason (locked: TryAcquire found it held; canceled, deadline: the caller gave up).")
	m.waiters = upDown("zkrecipes.waiters", "{waiter}",
		"Contenders of this process currently queued behind other holders.")
	m.lost = counter("zkrecipes.leases.lost", "{lease}",
		"Granted leases that ended without their own Release, by cause.")
	m.leading = upDown("zkrecipes.leading", "{term}",
		"Terms of leader.Run that this process leads now, by name.")
	m.holding, err = mt.Int64Gauge("zkrecipes.holding", metric.WithUnit("{grant}"),
		metric.WithDescription("Grants of this process's Acquire and TryAcquire live now (held, not yet released or lost)."))
	check(err)
	m.holdToken, err = mt.Int64Gauge("zkrecipes.holding.token", metric.WithUnit("{token}"),
		metric.WithDescription("The largest fencing token among the live grants of zkrecipes.holding; 0 when none."))
	check(err)
	m.sessions = upDown("zkrecipes.sessions", "{session}",
		"Open sessions of this process per connection state (CONNECTED, SUSPENDED, RECONNECTED, LOST).")
	m.transitions = counter("zkrecipes.session.transitions", "{transition}",
		"Connection-state transitions, by the state entered.")
	m.rejections = counter("zkrecipes.fence.rejections", "{write}",
		"Writes a fence rejected because their token was stale (a fence.Guard or any fence of resource/ wired with OnStale).")
	m.headroom, err = mt.Int64Gauge("zkrecipes.sequence.headroom", metric.WithUnit("{sequence}"),
		metric.WithDescription("Sequences the directory's counter can still give before its limit (2147483647), as of this process's last create there; 0 at the limit, where nodes are ordered by creation at one read per node per wakeup."))
	check(err)
	m.delays = counter("zkrecipes.lock.delays", "{grant}",
		"Grants that served a lock-delay because the previous holder ended without releasing.")
	m.delayed, err = mt.Float64Counter("zkrecipes.lock.delay", metric.WithUnit("s"),
		metric.WithDescription("Seconds of lock-delay served before grants."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// set returns the measurement option of the attributes kv plus
// WithAttributes'.
func (m *Metrics) set(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(kv, m.attrs...)...)
}

// where returns the kind and path attributes of kind and dir.
func (m *Metrics) where(kind, dir string) []attribute.KeyValue {
	if m.noPath {
		dir = ""
	}
	return []attribute.KeyValue{attribute.String("kind", kind), attribute.String("path", dir)}
}

// AcquireStarted implements recipe.Metrics: it adds 1 to
// zkrecipes.acquire.started.
func (m *Metrics) AcquireStarted(kind, dir string) {
	m.started.Add(context.Background(), 1, m.set(m.where(kind, dir)...))
}

// AcquireDone implements recipe.Metrics: it records took in
// zkrecipes.acquire.duration and, for an error, adds 1 to
// zkrecipes.acquire.failures with the error's reason.
func (m *Metrics) AcquireDone(kind, dir string, took time.Duration, err error) {
	result := "acquired"
	if err != nil {
		result = "failed"
		m.failures.Add(context.Background(), 1, m.set(append(m.where(kind, dir), attribute.String("reason", metricreason.Of(err)))...))
	}
	m.duration.Record(context.Background(), took.Seconds(), m.set(append(m.where(kind, dir), attribute.String("result", result))...))
}

// Waiting implements recipe.Metrics: it adds delta to zkrecipes.waiters.
func (m *Metrics) Waiting(kind, dir string, delta int) {
	m.waiters.Add(context.Background(), int64(delta), m.set(m.where(kind, dir)...))
}

// LeaseLost implements recipe.Metrics: it adds 1 to zkrecipes.leases.lost
// with the cause's reason.
func (m *Metrics) LeaseLost(kind, dir string, cause error) {
	m.lost.Add(context.Background(), 1, m.set(append(m.where(kind, dir), attribute.String("cause", metricreason.Of(cause)))...))
}

// Leading implements leader.LeadingMetrics: it adds delta to
// zkrecipes.leading.
func (m *Metrics) Leading(name string, delta int) {
	m.leading.Add(context.Background(), int64(delta), m.set(m.where("", name)[1]))
}

// Holding implements recipe.HoldingMetrics: it records zkrecipes.holding and
// zkrecipes.holding.token.
func (m *Metrics) Holding(kind, dir string, token fence.Token, delta int) {
	where := m.where(kind, dir)
	m.holds.Add(kind, where[1].Value.AsString(), token, delta, func(n int, largest fence.Token) {
		m.holding.Record(context.Background(), int64(n), m.set(where...))
		m.holdToken.Record(context.Background(), int64(largest), m.set(where...))
	})
}

// SessionState implements recipe.Metrics: it moves one session from state
// from to state to in zkrecipes.sessions (a closed session leaves it), and
// adds 1 to zkrecipes.session.transitions.
func (m *Metrics) SessionState(from, to recipe.ConnState, cause error) {
	ctx := context.Background()
	if from != 0 {
		m.sessions.Add(ctx, -1, m.set(attribute.String("state", from.String())))
	}
	if !errors.Is(cause, recipe.ErrSessionClosed) {
		m.sessions.Add(ctx, 1, m.set(attribute.String("state", to.String())))
	}
	m.transitions.Add(ctx, 1, m.set(attribute.String("state", to.String())))
}

// StaleRejected implements recipe.Metrics: it adds 1 to
// zkrecipes.fence.rejections. Wire it as a fence's OnStale (fence.Guard, or a fence of resource/).
func (m *Metrics) StaleRejected(e *fence.StaleError) {
	r := e.Resource
	if m.resource != nil {
		r = m.resource(r)
	}
	m.rejections.Add(context.Background(), 1, m.set(attribute.String("resource", r)))
}

// SequenceHeadroom implements zookeeper.SequenceMetrics (ZooKeeper only):
// it records remaining in zkrecipes.sequence.headroom. With
// WithoutPathAttribute it holds the value of the last create in any
// directory of the kind (see prommetrics.Metrics.SequenceHeadroom).
func (m *Metrics) SequenceHeadroom(kind, dir string, remaining int64) {
	m.headroom.Record(context.Background(), remaining, m.set(m.where(kind, dir)...))
}

// LockDelayServed implements recipe.DelayMetrics: it adds 1 to
// zkrecipes.lock.delays and d (in seconds) to zkrecipes.lock.delay.
func (m *Metrics) LockDelayServed(kind, dir string, d time.Duration) {
	opt := m.set(m.where(kind, dir)...)
	m.delays.Add(context.Background(), 1, opt)
	m.delayed.Add(context.Background(), d.Seconds(), opt)
}
