// Package nemtest is the test side of a short seeded nemesis run: what
// every backend's TestNemesis does around nemesis.RunTarget, written once.
// Run runs one recipe and fails the test on what no correct run shows (a
// violation, no grant at all), keeping the history where the failure
// says; Kinds tallies, over a test's runs, the fault attempts that took
// effect, so that the test fails on a kind it never really injected.
// Checks that belong to one backend (a register that must accept writes,
// ZooKeeper's page) stay in that backend's test.
package nemtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// RunTimeout is how long a run may take beyond cfg.Duration (workload
// start, heal, recovery, checks, leftovers) before Run gives up on it.
const RunTimeout = 3 * time.Minute

// Run runs recipe r on tg under cfg (its Logf set to t.Logf) with a
// timeout of cfg.Duration + RunTimeout, and logs the report's summary and
// its excused examples. A run that could not be carried out (RunTarget's
// error) or has no seed (it could not be replayed) is fatal. A run with
// violations, or with no grant at all, fails the test (Errorf) and
// returns.
//
// The history (JSON) is written to outDir if it is not "", else, only
// when there are violations, to the temporary directory; the file is
// named nemesis-<backend>-<recipe>-seed<N>-<UTC time>.json and the
// failure (or, for a clean run, a log line) names it. tg stays open.
func Run(t testing.TB, tg nemesis.Target, r nemesis.Recipe, cfg nemesis.Config, outDir string) *nemesis.Result {
	t.Helper()
	if cfg.Seed == 0 {
		t.Fatal("nemtest.Run: no seed")
	}
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+RunTimeout)
	defer cancel()
	start := time.Now()
	res, err := nemesis.RunTarget(ctx, tg, r, cfg)
	if err != nil {
		t.Fatalf("%s on %s, seed %d: %v", r.Name, tg.Name(), cfg.Seed, err)
	}
	rep := res.Report
	t.Logf("%s on %s, seed %d, in %v: %s", r.Name, tg.Name(), cfg.Seed, time.Since(start).Round(time.Millisecond), rep.Summary())
	for _, e := range rep.ExcusedExamples {
		t.Logf("excused: %s", e)
	}
	dir := outDir
	if dir == "" && len(rep.Violations) > 0 {
		dir = os.TempDir()
	}
	where := "history not kept"
	if dir != "" {
		name := fmt.Sprintf("nemesis-%s-%s-seed%d-%s.json", tg.Name(), r.Name, cfg.Seed,
			time.Now().UTC().Format("20060102T150405.000Z"))
		where = "history in " + filepath.Join(dir, name)
		if err := writeHistory(res.History, filepath.Join(dir, name)); err != nil {
			where = "history NOT written: " + err.Error()
		}
	}
	if len(rep.Violations) > 0 {
		t.Errorf("%d violations (%s):\n%s", len(rep.Violations), where, strings.Join(rep.Violations, "\n"))
	} else if dir != "" {
		t.Log(where)
	}
	if rep.Grants == 0 {
		t.Errorf("%s on %s: no grant at all", r.Name, tg.Name())
	}
	return res
}

// writeHistory writes h to path, creating its directory; an existing file
// is an error (two runs never share a file).
func writeHistory(h *nemesis.History, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = h.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Kinds tallies, per fault kind, the attempts that took effect over a
// test's runs: Faults[k] − FaultsFailed[k] of each report added. A kind
// whose every attempt failed (a kill-leader with no leader, an expiry of a
// session already gone) was not tested, however often it was tried. The
// zero value is an empty tally; it is not safe for concurrent use (a
// test's runs add to it one after the other).
type Kinds struct {
	took map[string]int
}

// Add counts rep's attempts that took effect.
func (k *Kinds) Add(rep *nemesis.Report) {
	if k.took == nil {
		k.took = map[string]int{}
	}
	for kind, n := range rep.Faults {
		k.took[kind] += n - rep.FaultsFailed[kind]
	}
}

// Took is how many attempts of kind took effect so far.
func (k *Kinds) Took(kind string) int { return k.took[kind] }

// Require fails t (Errorf, once per kind) for each of kinds with no
// attempt that took effect, naming the whole tally.
func (k *Kinds) Require(t testing.TB, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		if k.took[kind] == 0 {
			t.Errorf("the run never injected %s: not tried, or every attempt failed (took effect: %v)", kind, k.took)
		}
	}
}
