package main

import (
	"context"
	"slices"
	"time"
)

// meter samples, at the two edges of a workload's measured phase, what
// zkbench reports besides latency: the ZooKeeper server's packet count,
// the CPU time of the process that runs the peer's clients and the CPU
// time of the server's process. The Go peers call begin and end around
// their phase; the Curator and kazoo drivers stop at each edge ({"mark":
// ...}) until zkbench has sampled (extpeers.go). Only the phase is
// counted: not the sessions' setup, not the queueing of waiters. A waiters
// workload has a phase per cycle (its hand-offs); their differences are
// added up (phase.add).
type meter struct {
	mntr      string // ZooKeeper's host:port for mntr; "" for the other backends (no packets)
	clientPID int    // zkbench itself for the Go peers, the driver's process for the others
	serverPID int    // the ZooKeeper server's process; 0 when unknown (external, container, other backends)
	// mntrPackets is what one mntr exchange adds to the server's packet
	// count (ZooKeeper counts the four-letter word too): a phase's delta
	// holds one exchange, which end subtracts. calibrate measures it; 0
	// until then.
	mntrPackets int64
}

// calibrate sets m.mntrPackets to the median packet delta of 7
// back-to-back mntr exchanges, run before the workloads (the median: an
// idle session's ping may fall into one; the count varies by one between
// servers, by how the reply is written).
func (m *meter) calibrate(ctx context.Context) error {
	if m.mntr == "" {
		return nil
	}
	prev, err := packets(ctx, m.mntr)
	if err != nil {
		return err
	}
	var ds []int64
	for range 7 {
		n, err := packets(ctx, m.mntr)
		if err != nil {
			return err
		}
		ds = append(ds, n-prev)
		prev = n
	}
	slices.Sort(ds)
	m.mntrPackets = max(0, ds[len(ds)/2])
	return nil
}

// phase is one sample, or the difference of two: -1 in a field means not
// counted.
type phase struct {
	packets  int64
	cli, srv time.Duration
}

// begin samples the start of a phase: packets first, CPU last, so that the
// mntr exchange falls outside the CPU window.
func (m meter) begin(ctx context.Context) (phase, error) {
	ph := phase{packets: -1}
	if m.mntr != "" {
		n, err := packets(ctx, m.mntr)
		if err != nil {
			return ph, err
		}
		ph.packets = n
	}
	ph.srv = cpuOf(m.serverPID)
	ph.cli = cpuOf(m.clientPID)
	return ph, nil
}

// end samples the end of a phase (CPU first) and returns its difference
// from start, less the packets of the sampling itself.
func (m meter) end(ctx context.Context, start phase) (phase, error) {
	ph := phase{cli: cpuOf(m.clientPID), srv: cpuOf(m.serverPID), packets: -1}
	if m.mntr != "" {
		n, err := packets(ctx, m.mntr)
		if err != nil {
			return ph, err
		}
		ph.packets = n
	}
	d := start.to(ph)
	if d.packets >= 0 {
		d.packets = max(0, d.packets-m.mntrPackets)
	}
	return d, nil
}

// to returns the difference end - p, field by field; -1 where either is.
func (p phase) to(end phase) phase {
	d := phase{packets: -1, cli: -1, srv: -1}
	if p.packets >= 0 && end.packets >= 0 {
		d.packets = end.packets - p.packets
	}
	if p.cli >= 0 && end.cli >= 0 {
		d.cli = end.cli - p.cli
	}
	if p.srv >= 0 && end.srv >= 0 {
		d.srv = end.srv - p.srv
	}
	return d
}

// add returns the sum of two differences, field by field; -1 where either
// is (a sum is only as measured as its least measured part).
func (p phase) add(q phase) phase {
	s := phase{packets: -1, cli: -1, srv: -1}
	if p.packets >= 0 && q.packets >= 0 {
		s.packets = p.packets + q.packets
	}
	if p.cli >= 0 && q.cli >= 0 {
		s.cli = p.cli + q.cli
	}
	if p.srv >= 0 && q.srv >= 0 {
		s.srv = p.srv + q.srv
	}
	return s
}

// cpuOf is processCPU(pid), or -1 when pid is 0 or cannot be read.
func cpuOf(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	d, err := processCPU(pid)
	if err != nil {
		return -1
	}
	return d
}
