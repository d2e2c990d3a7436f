package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"go.uber.org/goleak"
)

// runMem runs r on a fresh memTarget with a 1 s TTL and checks what every
// run must show: no violation, some grant, a recovery.
func runMem(t *testing.T, r nemesis.Recipe, cfg nemesis.Config) *nemesis.Result {
	t.Helper()
	mt, err := newMemTarget(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Logf = t.Logf
	res, err := nemesis.RunTarget(ctx, mt, r, cfg)
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
// it thaws is refused by the registers once the next holder wrote; nothing
// is left on the Server. Whether the next holder wrote before the thaw
// depends on timing (the pause lasts 1.2 to 2 TTL, the next grant comes
// about 1.1 TTL after the freeze): one of three seeded runs must show it.
func TestPauseClientOnMemlock(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		res := runMem(t, nemesis.LockRecipe(), nemesis.Config{Clients: 4, Seed: seed, Duration: 4 * time.Second, FaultEvery: time.Second,
			Faults: []string{nemesis.FaultPauseClient}})
		rep := res.Report
		if rep.Faults[nemesis.FaultPauseClient] == 0 {
			t.Fatalf("no pause-client fault: %s", rep.Summary())
		}
		if m := rep.Margins; m.Count == 0 || m.Min <= 0 || m.Min > m.Median || m.Median > m.Max {
			t.Errorf("margins %s: want some, all positive, in order", m)
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
		if rep.Writes["mem"][nemesis.Accepted] > 0 && rep.Writes["mem"][nemesis.Stale] > 0 && rep.StaleRejected() > 0 {
			return
		}
		t.Logf("seed %d: no thawed write refused (the next holder had not written yet)", seed)
	}
	t.Error("in three runs, no write of a thawed holder was refused by the registers")
}

// TestGenericFaultsOnMemlock: leader.Run over memlock under every generic
// client fault.
func TestGenericFaultsOnMemlock(t *testing.T) {
	res := runMem(t, nemesis.LeaderRecipe(), nemesis.Config{Clients: 3, Seed: 2, Duration: 3 * time.Second, FaultEvery: 300 * time.Millisecond})
	for _, k := range nemesis.GenericFaults {
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
	_, err = nemesis.RunTarget(context.Background(), mt, nemesis.LockRecipe(), nemesis.Config{Faults: []string{nemesis.FaultExpire}})
	if err == nil || !strings.Contains(err.Error(), `unknown fault kind "expire-session"`) {
		t.Errorf("nemesis.RunTarget with expire-session on memlock: %v", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
