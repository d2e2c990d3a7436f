package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Spec is one workload run, as sent to every driver (the Go drivers in
// process, the peer drivers as a "run key=value ..." line on stdin).
type Spec struct {
	// Kind is "loop" (Clients sessions, each doing acquire → tiny critical
	// section → release until Duration has passed) or "waiters" (Cycles
	// cycles on the same sessions, each a holder, Waiters contenders queued
	// behind it, then a chain of Waiters hand-offs).
	Kind    string
	Clients int  // loop: number of clients, each on its own session
	Waiters int  // waiters: number of queued contenders
	Shared  bool // waiters: all waiters on one session (else one session each)
	// Duration is, for loop, the measured time; for waiters, the cap on
	// the workload's wall time (sessions' setup included): no cycle starts
	// after it, but the first always runs; 0 is no cap.
	Duration time.Duration
	Cycles   int    // waiters: cycles to run (at least one runs)
	Path     string // the lock path (absolute, no chroot)
}

// cyclesFor is the number of waiters cycles of w hand-offs each that
// measure at least handoffs hand-offs: at least one.
func cyclesFor(handoffs, w int) int {
	if w < 1 {
		return 1
	}
	return max(1, (handoffs+w-1)/w)
}

// Name is the workload's name in tables and JSON: "uncontended",
// "contended-8", "waiters-100-sep", "waiters-100-one".
func (s Spec) Name() string {
	switch {
	case s.Kind == "loop" && s.Clients == 1:
		return "uncontended"
	case s.Kind == "loop":
		return fmt.Sprintf("contended-%d", s.Clients)
	case s.Shared:
		return fmt.Sprintf("waiters-%d-one", s.Waiters)
	default:
		return fmt.Sprintf("waiters-%d-sep", s.Waiters)
	}
}

// line is the request line of the peer driver protocol.
func (s Spec) line() string {
	return fmt.Sprintf("run kind=%s clients=%d waiters=%d shared=%t duration_ms=%d cycles=%d path=%s",
		s.Kind, s.Clients, s.Waiters, s.Shared, s.Duration.Milliseconds(), s.Cycles, s.Path)
}

// Result is what a driver reports for one Spec: one JSON line.
type Result struct {
	Type     string `json:"type"` // "run" for one round, "median" for the median of the rounds
	Peer     string `json:"peer"`
	Workload string `json:"workload"`
	Round    int    `json:"round"` // 1-based; 0 for medians
	// Ops is the number of acquisitions measured (hand-offs for waiters,
	// of every cycle).
	Ops int `json:"ops"`
	// Seconds is the measured time: for waiters, the sum over the cycles
	// of each cycle's hand-off time, from the start of the holder's
	// release to the return of the last waiter's acquire.
	Seconds float64 `json:"seconds"`
	// AcqPerS is Ops / Seconds.
	AcqPerS float64 `json:"acq_per_s"`
	// P50us and P99us are acquire latencies in microseconds (waiters: from
	// the start of the previous holder's release to the return of the next
	// holder's acquire, over every cycle).
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	// Packets is the server's zk_packets_received + zk_packets_sent delta
	// over the measured phase (mntr; for waiters, the sum over the cycles'
	// hand-off phases, as for the CPU figures), PacketsPerAcq that divided
	// by Ops;
	// both -1 for the other backends' peers, whose servers do not count.
	Packets       int64   `json:"packets"`
	PacketsPerAcq float64 `json:"packets_per_acq"`
	// ClientCPUus is the CPU time (user + system) per acquisition, in
	// microseconds, over the measured phase, of the process that runs the
	// peer's clients: zkbench for the Go peers (so it includes anything
	// else zkbench does meanwhile), the Java or Python driver for Curator
	// and kazoo. ServerCPUus is the ZooKeeper server's, over the same
	// phase. Omitted (0) when not measured: the server's when it is not a
	// process zkbench started (ZK_SERVERS, a container) and for the other
	// backends' peers; both outside Linux.
	ClientCPUus float64 `json:"cli_cpu_us_per_acq,omitempty"`
	ServerCPUus float64 `json:"srv_cpu_us_per_acq,omitempty"`
	// LatencyMs is the latency in milliseconds that -latency added in each
	// direction between the peer's clients and ZooKeeper (a proxy); 0 for
	// direct loopback connections and for the other backends' peers.
	LatencyMs float64 `json:"latency_ms"`
	// HeapPerWaiter is the client heap growth per queued waiter in bytes,
	// over the first cycle's queueing (waiters workloads only; -1
	// otherwise). Go: HeapAlloc; Java: used heap
	// after System.gc(); Python: tracemalloc. Java's figure is noisy and can
	// come out negative when garbage of earlier runs is collected.
	HeapPerWaiter float64 `json:"heap_per_waiter"`
	// Overlaps counts critical sections entered while another was running
	// (must be 0).
	Overlaps int `json:"overlaps"`
	// Cycles is the number of waiters cycles run; Capped reports that they
	// stopped at the wall-time cap (Spec.Duration) before Spec.Cycles
	// (for a median: in some round).
	Cycles int    `json:"cycles,omitempty"`
	Capped bool   `json:"capped,omitempty"`
	Error  string `json:"error,omitempty"`
}

// finish fills the derived fields from the latencies, the phase's length
// (for waiters, the sum of the cycles') and what the meter measured over it.
func (r *Result) finish(lat []time.Duration, elapsed time.Duration, ph phase) {
	r.Ops = len(lat)
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.AcqPerS = float64(r.Ops) / r.Seconds
	}
	r.P50us = percentile(lat, 0.50)
	r.P99us = percentile(lat, 0.99)
	r.setPhase(ph)
}

// setPhase fills the per-acquisition figures of the meter's phase, for
// r.Ops acquisitions.
func (r *Result) setPhase(ph phase) {
	r.Packets, r.PacketsPerAcq = ph.packets, 0
	r.ClientCPUus, r.ServerCPUus = 0, 0
	if ph.packets < 0 {
		r.Packets, r.PacketsPerAcq = -1, -1 // not counted
	}
	if r.Ops == 0 {
		return
	}
	perAcq := func(d time.Duration) float64 {
		if d < 0 {
			return 0 // not measured
		}
		return float64(d) / float64(time.Microsecond) / float64(r.Ops)
	}
	if ph.packets >= 0 {
		r.PacketsPerAcq = float64(ph.packets) / float64(r.Ops)
	}
	r.ClientCPUus, r.ServerCPUus = perAcq(ph.cli), perAcq(ph.srv)
}

// percentile returns the nearest-rank q-quantile of d in microseconds (it
// sorts d).
func percentile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	i = max(0, min(i, len(d)-1))
	return float64(d[i]) / float64(time.Microsecond)
}

// median returns the median of the results of one peer and workload: each
// metric is the median of its values across rounds.
func median(rs []Result) Result {
	m := rs[0]
	m.Type, m.Round, m.Error = "median", 0, ""
	med := func(f func(Result) float64) float64 {
		v := make([]float64, 0, len(rs))
		for _, r := range rs {
			v = append(v, f(r))
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	m.Ops = int(med(func(r Result) float64 { return float64(r.Ops) }))
	m.Seconds = med(func(r Result) float64 { return r.Seconds })
	m.AcqPerS = med(func(r Result) float64 { return r.AcqPerS })
	m.P50us = med(func(r Result) float64 { return r.P50us })
	m.P99us = med(func(r Result) float64 { return r.P99us })
	m.Packets = int64(med(func(r Result) float64 { return float64(r.Packets) }))
	m.PacketsPerAcq = med(func(r Result) float64 { return r.PacketsPerAcq })
	m.HeapPerWaiter = med(func(r Result) float64 { return r.HeapPerWaiter })
	m.ClientCPUus = med(func(r Result) float64 { return r.ClientCPUus })
	m.ServerCPUus = med(func(r Result) float64 { return r.ServerCPUus })
	m.Cycles = int(med(func(r Result) float64 { return float64(r.Cycles) }))
	for _, r := range rs[1:] {
		m.Overlaps += r.Overlaps
		m.Capped = m.Capped || r.Capped
	}
	return m
}

// parseInts parses "2,10,100".
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
