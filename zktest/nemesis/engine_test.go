package nemesis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// runMem runs r on a fresh memTarget with a 1 s TTL and checks what every
// run must show: no violation, some grant, a recovery.
func runMem(t *testing.T, r Recipe, cfg Config) *Result {
	t.Helper()
	mt, err := newMemTarget(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Logf = t.Logf
	res, err := RunTarget(ctx, mt, r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	t.Logf("%s on memlock: %s", r.Name, rep.Summary())
	if len(rep.Violations) > 0 || rep.Grants == 0 || rep.Recovery < 0 || res.History.Backend != "mem" {
		t.Errorf("violations %q, grants %d, recovery %v, backend %q", rep.Violations, rep.Grants, rep.Recovery, res.History.Backend)
	}
	return res
}

// TestPauseClientOnMemlock: a holder frozen past the TTL (its link
// blackholed, its hold stalled) loses its lease before the Server lets
// the next holder in (every margin positive), and the write it makes when
// it thaws is refused by the registers; nothing is left on the Server.
func TestPauseClientOnMemlock(t *testing.T) {
	res := runMem(t, LockRecipe(), Config{Clients: 3, Seed: 1, Duration: 4 * time.Second, FaultEvery: 300 * time.Millisecond,
		Faults: []string{FaultPauseClient}})
	rep := res.Report
	if rep.Faults[FaultPauseClient] == 0 {
		t.Fatalf("no pause-client fault: %s", rep.Summary())
	}
	if m := rep.Margins; m.Count == 0 || m.Min <= 0 || m.Min > m.Median || m.Median > m.Max {
		t.Errorf("margins %s: want some, all positive, in order", m)
	}
	if rep.Writes["mem"][Accepted] == 0 || rep.StaleRejected() == 0 {
		t.Errorf("the target's register: %v; stale refused %d (a thawed holder writes late)", rep.Writes["mem"], rep.StaleRejected())
	}
	lost := 0
	for _, g := range res.History.Grants {
		if g.Lost && strings.Contains(g.Cause, recipe.ErrSuspended.Error()) {
			lost++
		}
	}
	if lost == 0 {
		t.Errorf("no lease ended suspended: the pause did not cut the holder off")
	}
}

// TestGenericFaultsOnMemlock: leader.Run over memlock under every generic
// client fault.
func TestGenericFaultsOnMemlock(t *testing.T) {
	res := runMem(t, LeaderRecipe(), Config{Clients: 3, Seed: 2, Duration: 4 * time.Second, FaultEvery: 300 * time.Millisecond})
	for _, k := range GenericFaults {
		if res.Report.Faults[k] == 0 {
			t.Errorf("never tried %s: %v", k, res.Report.Faults)
		}
	}
}

// TestRunTargetRefusesUnknownKinds: a kind neither generic nor the
// target's is ErrBadConfig, before anything runs.
func TestRunTargetRefusesUnknownKinds(t *testing.T) {
	mt, err := newMemTarget(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Close()
	_, err = RunTarget(context.Background(), mt, LockRecipe(), Config{Faults: []string{FaultExpire}})
	if err == nil || !strings.Contains(err.Error(), `unknown fault kind "expire-session"`) {
		t.Errorf("RunTarget with expire-session on memlock: %v", err)
	}
}
