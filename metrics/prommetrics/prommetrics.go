// Package prommetrics exports the events of this module's sessions, locks and
// leader loops (the recipe.Metrics hook) as Prometheus metrics, with
// github.com/prometheus/client_golang. It works for every backend
// (ZooKeeper, etcd, PostgreSQL, Redis, memlock) and for leader.Run, and
// links none of their clients; it lives in a package of its own so that the
// backends depend on no metrics library. Install one Metrics with each
// backend's WithMetrics and with leader.WithMetrics:
//
//	m := prommetrics.New()
//	prometheus.MustRegister(m)
//	s, err := zookeeper.Connect(ctx, servers, zookeeper.WithMetrics(m))
//	// or etcdlock.Connect(ctx, url, etcdlock.WithMetrics(m)), pglock.Connect,
//	// redislock.Connect (the same option), srv.Connect(memlock.WithMetrics(m))
//	...
//	err = leader.Run(ctx, lock, fn, leader.WithMetrics(m, "scheduler"))
//	guard.OnStale = m.StaleRejected // a fence at the resource: fence.Guard, fencesql, fencezk, fenceetcd, fenceredis
//
// The metrics (all prefixed zkrecipes_; kind and path are the kind and dir
// of recipe.Metrics: on ZooKeeper the recipe's node kind (lock, read,
// write, lease, elect, latch) and directory, on the other backends "lock"
// and the lock's name, for leader.Run "leader" and its name):
//
//	zkrecipes_acquire_started_total{kind,path}                counter
//	zkrecipes_acquire_duration_seconds{kind,path,result}      histogram  result: acquired | failed
//	zkrecipes_acquire_failures_total{kind,path,reason}        counter    reason: see Reason
//	zkrecipes_waiters{kind,path}                              gauge      this process's contenders queued
//	zkrecipes_leases_lost_total{kind,path,cause}              counter    cause: see Reason
//	zkrecipes_leading{path}                                   gauge      leader.Run terms leading now (LeadingMetrics)
//	zkrecipes_holding{kind,path}                              gauge      grants this process holds now (HoldingMetrics)
//	zkrecipes_holding_token{kind,path}                        gauge      the largest token among them; 0 when none
//	zkrecipes_sessions{state}                                 gauge      open sessions per connection state (ZooKeeper, etcd)
//	zkrecipes_session_transitions_total{state}                counter    transitions into each state (ZooKeeper, etcd)
//	zkrecipes_fence_rejections_total{resource}                counter    stale writes rejected by a fence wired with OnStale
//	zkrecipes_sequence_headroom{kind,path}                    gauge      sequences left before the directory's limit (ZooKeeper)
//	zkrecipes_lock_delays_total{kind,path}                    counter    grants that served a lock-delay (DelayMetrics)
//	zkrecipes_lock_delay_seconds_total{kind,path}             counter    seconds of lock-delay served
//
// The path and resource labels carry whatever the application names its
// locks and fenced resources, verbatim: one series per distinct name, and
// any personal data in a name ends up in Prometheus. Keep them few, stable
// and free of personal data (not one per request, row or customer), or
// drop them: WithoutPathLabel, WithoutResourceLabel (or bucket the
// resource with WithResourceLabel).
package prommetrics

import (
	"errors"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/holding"
	"github.com/zkrecipes/zkrecipes/internal/metricreason"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Namespace prefixes every metric name.
const Namespace = "zkrecipes"

// DefaultBuckets are the acquire-duration histogram's buckets, in seconds:
// from 1 ms (an uncontended grant on a local ensemble) to 5 minutes (a
// waiter behind long holders).
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics implements recipe.Metrics by updating Prometheus metrics, and
// prometheus.Collector so that it can be registered as one; also
// leader.LeadingMetrics and ZooKeeper's SequenceMetrics. One Metrics can
// serve many sessions of any backends and many leader loops at once. It is
// safe for concurrent use, and its methods never block (they only update
// in-memory metrics).
type Metrics struct {
	noPath   bool
	resource func(string) string // WithResourceLabel; nil: the resource's name

	started     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	failures    *prometheus.CounterVec
	waiters     *prometheus.GaugeVec
	lost        *prometheus.CounterVec
	leading     *prometheus.GaugeVec
	holding     *prometheus.GaugeVec
	holdToken   *prometheus.GaugeVec
	holds       holding.Set
	sessions    *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	headroom    *prometheus.GaugeVec
	delays      *prometheus.CounterVec
	delayed     *prometheus.CounterVec
}

var _ recipe.Metrics = (*Metrics)(nil)
var _ leader.LeadingMetrics = (*Metrics)(nil)
var _ recipe.DelayMetrics = (*Metrics)(nil)
var _ recipe.HoldingMetrics = (*Metrics)(nil)
var _ prometheus.Collector = (*Metrics)(nil)

type config struct {
	buckets  []float64
	noPath   bool
	resource func(string) string
	labels   prometheus.Labels
}

// Option configures New.
type Option func(*config)

// WithBuckets sets the buckets (in seconds) of
// zkrecipes_acquire_duration_seconds (default DefaultBuckets).
func WithBuckets(b []float64) Option { return func(c *config) { c.buckets = b } }

// WithoutPathLabel reports every recipe directory under path="" (for
// processes that use many lock directories, to bound the number of series).
func WithoutPathLabel() Option { return func(c *config) { c.noPath = true } }

// WithoutResourceLabel reports every fence rejection under resource=""
// (for resources named per row or per customer, whose names would make
// one series each and may be personal data).
func WithoutResourceLabel() Option { return WithResourceLabel(func(string) string { return "" }) }

// WithResourceLabel reports a fence rejection of the resource named name
// under resource=f(name): a bucket of few, stable values (say the name's
// first segment: "invoice/cust-4711/..." to "invoice"). f must be fast and
// safe for concurrent use; nil restores the default (the name itself).
func WithResourceLabel(f func(name string) string) Option {
	return func(c *config) { c.resource = f }
}

// WithConstLabels adds constant labels to every metric (e.g. the ensemble's
// name when a process talks to several).
func WithConstLabels(l prometheus.Labels) Option { return func(c *config) { c.labels = l } }

// New returns a Metrics with every metric at zero; register it with a
// prometheus.Registerer and pass it to a backend's WithMetrics
// (zookeeper.WithMetrics, etcdlock.WithMetrics, ...) and to
// leader.WithMetrics.
func New(opts ...Option) *Metrics {
	c := config{buckets: DefaultBuckets}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help, ConstLabels: c.labels}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help, ConstLabels: c.labels}, labels)
	}
	m := &Metrics{
		noPath:   c.noPath,
		resource: c.resource,
		started: counter("acquire_started_total",
			"Acquisitions (Acquire, TryAcquire, Campaign) started.", "kind", "path"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "acquire_duration_seconds",
			Help:    "Time from the start of an acquisition to its grant (result=acquired) or its failure (result=failed), waiting included.",
			Buckets: c.buckets, ConstLabels: c.labels}, []string{"kind", "path", "result"}),
		failures: counter("acquire_failures_total",
			"Acquisitions that ended without a grant, by reason (locked: TryAcquire found it held; canceled, deadline: the caller gave up).",
			"kind", "path", "reason"),
		waiters: gauge("waiters",
			"Contenders of this process currently queued behind other holders.", "kind", "path"),
		lost: counter("leases_lost_total",
			"Granted leases that ended without their own Release, by cause.", "kind", "path", "cause"),
		leading: gauge("leading",
			"Terms of leader.Run that this process leads now, by name.", "path"),
		holding: gauge("holding",
			"Grants of this process's Acquire and TryAcquire live now (held, not yet released or lost).", "kind", "path"),
		holdToken: gauge("holding_token",
			"The largest fencing token among the live grants of zkrecipes_holding (exact up to 2^53); 0 when none.", "kind", "path"),
		sessions: gauge("sessions",
			"Open sessions of this process per connection state (CONNECTED, SUSPENDED, RECONNECTED, LOST).", "state"),
		transitions: counter("session_transitions_total",
			"Connection-state transitions, by the state entered.", "state"),
		rejections: counter("fence_rejections_total",
			"Writes a fence rejected because their token was stale (a fence.Guard or any fence of resource/ wired with OnStale).", "resource"),
		headroom: gauge("sequence_headroom",
			"Sequences the directory's counter can still give before its limit (2147483647), as of this process's last create there; 0 at the limit, where nodes are ordered by creation at one read per node per wakeup.",
			"kind", "path"),
		delays: counter("lock_delays_total",
			"Grants that served a lock-delay because the previous holder ended without releasing.", "kind", "path"),
		delayed: counter("lock_delay_seconds_total",
			"Seconds of lock-delay served before grants.", "kind", "path"),
	}
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.started, m.duration, m.failures, m.waiters, m.lost, m.leading, m.holding, m.holdToken, m.sessions, m.transitions, m.rejections, m.headroom, m.delays, m.delayed}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) path(dir string) string {
	if m.noPath {
		return ""
	}
	return dir
}

// AcquireStarted implements recipe.Metrics: it counts
// zkrecipes_acquire_started_total.
func (m *Metrics) AcquireStarted(kind, dir string) {
	m.started.WithLabelValues(kind, m.path(dir)).Inc()
}

// AcquireDone implements recipe.Metrics: it observes
// zkrecipes_acquire_duration_seconds and, for an error, counts
// zkrecipes_acquire_failures_total with the error's Reason.
func (m *Metrics) AcquireDone(kind, dir string, took time.Duration, err error) {
	result := "acquired"
	if err != nil {
		result = "failed"
		m.failures.WithLabelValues(kind, m.path(dir), Reason(err)).Inc()
	}
	m.duration.WithLabelValues(kind, m.path(dir), result).Observe(took.Seconds())
}

// Waiting implements recipe.Metrics: it adds delta to zkrecipes_waiters.
func (m *Metrics) Waiting(kind, dir string, delta int) {
	m.waiters.WithLabelValues(kind, m.path(dir)).Add(float64(delta))
}

// LeaseLost implements recipe.Metrics: it counts
// zkrecipes_leases_lost_total with the cause's Reason.
func (m *Metrics) LeaseLost(kind, dir string, cause error) {
	m.lost.WithLabelValues(kind, m.path(dir), Reason(cause)).Inc()
}

// Leading implements leader.LeadingMetrics: it adds delta to
// zkrecipes_leading.
func (m *Metrics) Leading(name string, delta int) {
	m.leading.WithLabelValues(m.path(name)).Add(float64(delta))
}

// Holding implements recipe.HoldingMetrics: it sets zkrecipes_holding and
// zkrecipes_holding_token.
func (m *Metrics) Holding(kind, dir string, token fence.Token, delta int) {
	p := m.path(dir)
	m.holds.Add(kind, p, token, delta, func(n int, largest fence.Token) {
		m.holding.WithLabelValues(kind, p).Set(float64(n))
		m.holdToken.WithLabelValues(kind, p).Set(float64(largest))
	})
}

// SessionState implements recipe.Metrics: it moves one session from state
// from to state to in zkrecipes_sessions (a closed session leaves it), and
// counts zkrecipes_session_transitions_total.
func (m *Metrics) SessionState(from, to recipe.ConnState, cause error) {
	if from != 0 {
		m.sessions.WithLabelValues(from.String()).Dec()
	}
	if !errors.Is(cause, recipe.ErrSessionClosed) {
		m.sessions.WithLabelValues(to.String()).Inc()
	}
	m.transitions.WithLabelValues(to.String()).Inc()
}

// StaleRejected implements recipe.Metrics: it counts
// zkrecipes_fence_rejections_total. Wire it as a fence's OnStale (fence.Guard, or a fence of resource/).
func (m *Metrics) StaleRejected(e *fence.StaleError) {
	r := e.Resource
	if m.resource != nil {
		r = m.resource(r)
	}
	m.rejections.WithLabelValues(r).Inc()
}

// SequenceHeadroom implements zookeeper.SequenceMetrics (ZooKeeper only): it sets
// zkrecipes_sequence_headroom. With WithoutPathLabel it holds the value of
// the last create in any directory of the kind, so a busy healthy directory
// can hide one at the limit: alert on min_over_time of it, or rely on the
// Session's WARN, which names the directory.
func (m *Metrics) SequenceHeadroom(kind, dir string, remaining int64) {
	m.headroom.WithLabelValues(kind, m.path(dir)).Set(float64(remaining))
}

// LockDelayServed implements recipe.DelayMetrics: it counts
// zkrecipes_lock_delays_total and adds d to zkrecipes_lock_delay_seconds_total.
func (m *Metrics) LockDelayServed(kind, dir string, d time.Duration) {
	m.delays.WithLabelValues(kind, m.path(dir)).Inc()
	m.delayed.WithLabelValues(kind, m.path(dir)).Add(d.Seconds())
}

// Reason names an error of an acquisition or the cause of a lease's end as
// the reason and cause labels do: "locked" (recipe.ErrLocked), "canceled"
// (context.Canceled), "deadline" (context.DeadlineExceeded), "suspended"
// (recipe.ErrSuspended), "session_lost", "session_closed", "node_deleted",
// "lease_lost" (recipe.ErrLeaseLost, e.g. a downgrade's anchor ended),
// "no_permission", "bad_option", "sequence_limit" (zookeeper.ErrSequenceLimit),
// "other" for anything else.
func Reason(err error) string { return metricreason.Of(err) }
