package nemtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB that keeps its Errorf messages.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestKinds: only attempts that took effect count, over every report
// added, and Require names each kind that never took effect.
func TestKinds(t *testing.T) {
	var k Kinds
	k.Add(&nemesis.Report{Faults: map[string]int{"cut": 2, "kill-leader": 1}, FaultsFailed: map[string]int{"kill-leader": 1}})
	k.Add(&nemesis.Report{Faults: map[string]int{"cut": 1, "latency": 1}, FaultsFailed: map[string]int{"cut": 1}})
	if k.Took("cut") != 2 || k.Took("kill-leader") != 0 || k.Took("latency") != 1 {
		t.Fatalf("tally: cut %d, kill-leader %d, latency %d; want 2, 0, 1", k.Took("cut"), k.Took("kill-leader"), k.Took("latency"))
	}
	r := &recorder{TB: t}
	k.Require(r, "cut", "kill-leader", "latency", "pause-server")
	if len(r.errs) != 2 || !strings.Contains(r.errs[0], "kill-leader") || !strings.Contains(r.errs[1], "pause-server") {
		t.Errorf("Require reported %q, want kill-leader then pause-server", r.errs)
	}
}
