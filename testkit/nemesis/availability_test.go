package nemesis

import (
	"slices"
	"strings"
	"testing"
)

// TestStall: the longest stretch with no grant while some client asked is
// in the report and the summary: in base(), client 1 asks at 5 ms and is
// granted at 110 ms, the grant before was at 10 ms.
func TestStall(t *testing.T) {
	h := base()
	h.Clients = 2
	r := Check(h, AtMost(1))
	if r.Stall != (Span{10 * ms, 110 * ms}) {
		t.Errorf("stall %+v, want 10ms to 110ms", r.Stall)
	}
	if !strings.Contains(r.Summary(), "longest stall 100ms (from 10ms to 110ms); recovery 50ms") {
		t.Errorf("summary %q", r.Summary())
	}
	// a failed attempt that asks until 800 ms, with no grant between
	// 110 ms and 950 ms, makes a longer one, ended by the attempt
	h.Ops = append(h.Ops, Op{Kind: OpAcquire, Client: 1, Grant: -1, Call: 300 * ms, Return: 800 * ms, Err: "context deadline exceeded"})
	if r := Check(h, AtMost(1)); r.Stall != (Span{300 * ms, 800 * ms}) {
		t.Errorf("stall with a failed attempt %+v, want 300ms to 800ms", r.Stall)
	}
	h.Grants, h.Ops = nil, nil
	if r := Check(h, AtMost(1)); r.Stall.Known() || !strings.Contains(r.Summary(), "longest stall none") || !strings.Contains(r.Summary(), "writes none;") {
		t.Errorf("nobody asked: stall %+v, summary %q", r.Stall, r.Summary())
	}
}

// TestIneffective: a fault kind whose every attempt failed is named as
// not tested, loudly, in the summary (a run on a server it could not kill
// read as a pass).
func TestIneffective(t *testing.T) {
	h := base()
	h.Clients = 2
	h.Faults = []Fault{
		{Kind: FaultKillServer, Client: -1, Start: 50 * ms, End: 50 * ms, Err: "operation not supported on an external server"},
		{Kind: FaultKillLeader, Client: -1, Start: 60 * ms, End: 70 * ms, Err: "no leader"},
		{Kind: FaultKillLeader, Client: -1, Start: 80 * ms, End: 90 * ms},
	}
	r := Check(h, AtMost(1))
	if got := r.Ineffective(); !slices.Equal(got, []string{FaultKillServer}) {
		t.Errorf("Ineffective %v, want [kill-server]", got)
	}
	if s := r.Summary(); !strings.Contains(s, "NEVER TOOK EFFECT (not tested): kill-server: 1 tried, 1 failed;") {
		t.Errorf("summary %q", s)
	}
}
