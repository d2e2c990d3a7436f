package redisnemesis

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
)

var (
	seed     = flag.Uint64("nemesis.seed", 1, "seed of the nemesis runs (the leader run uses seed+1)")
	duration = flag.Duration("nemesis.duration", 5*time.Second, "fault phase of each nemesis run")
	every    = flag.Duration("nemesis.every", 300*time.Millisecond, "mean wait between two faults")
	allKinds = flag.Bool("nemesis.all", false, "every run injects every fault kind (for long runs; the short run splits them)")
	outDir   = flag.String("nemesis.out", "", "directory for each run's history (default: only a failing run's, in the temporary directory)")
)

// TestNemesis is the short seeded run of the Redis backend under the
// nemesis: redislock's Mutex (LockRecipe) and leader.Run over it
// (LeaderRecipe), four clients on a 2 s TTL, each behind its own fault
// proxy, one server (AOF fsynced always) killed and restarted, frozen
// (SIGSTOP) and kept busy (DEBUG SLEEP), clients' connections killed by
// the server, lock keys deleted under their holders, plus the engine's
// client faults (cut, blackhole, latency, a holder paused past T). Every
// kind is tried at least once. A longer run:
//
//	go test -race -run TestNemesis -timeout 30m -nemesis.duration 150s -nemesis.all -nemesis.out /tmp/redis-nemesis ./redisnemesis
func TestNemesis(t *testing.T) {
	_, tgt := ownTarget(t)
	// Each run tours its kinds first (server faults one after the other,
	// up to 2.5 s each): two server kinds in the first run and one in the
	// second let 5 s runs try all.
	runs := []struct {
		r     nemesis.Recipe
		kinds []string
	}{
		{nemesis.LockRecipe(), []string{FaultKillServer, FaultPauseServer, FaultDeleteKey, FaultClientKill,
			nemesis.FaultCut, nemesis.FaultLatency, nemesis.FaultPauseClient}},
		{nemesis.LeaderRecipe(), []string{FaultSleepServer, FaultDeleteKey, FaultClientKill,
			nemesis.FaultBlackhole, nemesis.FaultLatency, nemesis.FaultPauseClient}},
	}
	seen := map[string]int{}
	for i, run := range runs {
		if *allKinds {
			run.kinds = nil
		}
		t.Run(run.r.Name, func(t *testing.T) {
			rep := runAndCheck(t, tgt, run.r, nemesis.Config{Seed: *seed + uint64(i), Duration: *duration,
				FaultEvery: *every, Faults: run.kinds})
			for k, n := range rep.Faults {
				seen[k] += n - rep.FaultsFailed[k] // tried and took effect
			}
		})
	}
	kinds := append([]string(nil), nemesis.GenericFaults...)
	for _, k := range tgt.Faults() {
		kinds = append(kinds, k.Name)
	}
	for _, k := range kinds {
		if seen[k] == 0 {
			t.Errorf("the run never injected %s: not tried, or every attempt failed (took effect: %v)", k, seen)
		}
	}
}

// runAndCheck runs r on tgt and fails the test on any violation, writing
// the history where the failure message says.
func runAndCheck(t *testing.T, tgt *Target, r nemesis.Recipe, cfg nemesis.Config) *nemesis.Report {
	t.Helper()
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := nemesis.RunTarget(ctx, tgt, r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	t.Logf("%s seed %d in %v: %s", r.Name, cfg.Seed, time.Since(start).Round(time.Millisecond), rep.Summary())
	for _, e := range rep.ExcusedExamples {
		t.Logf("excused: %s", e)
	}
	dir := *outDir
	if dir == "" && len(rep.Violations) > 0 {
		dir = os.TempDir()
	}
	where := ""
	if dir != "" {
		f := filepath.Join(dir, fmt.Sprintf("nemesis-redis-%s-seed%d-%s.json", r.Name, cfg.Seed, time.Now().UTC().Format("20060102T150405Z")))
		if err := writeHistory(res.History, f); err != nil {
			where = "history NOT written: " + err.Error()
		} else {
			where = "history in " + f
		}
		t.Log(where)
	}
	if len(rep.Violations) > 0 {
		t.Errorf("%d violations (%s):\n%s", len(rep.Violations), where, strings.Join(rep.Violations, "\n"))
	}
	if rep.Grants == 0 {
		t.Errorf("no grant at all")
	}
	return rep
}

func writeHistory(h *nemesis.History, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := h.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
