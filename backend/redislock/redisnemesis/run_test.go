package redisnemesis

import (
	"flag"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
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
	var took nemtest.Kinds
	for i, run := range runs {
		if *allKinds {
			run.kinds = nil
		}
		t.Run(run.r.Name, func(t *testing.T) {
			res := nemtest.Run(t, tgt, run.r, nemesis.Config{Seed: *seed + uint64(i), Duration: *duration,
				FaultEvery: *every, Faults: run.kinds}, *outDir)
			took.Add(res.Report)
		})
	}
	took.Require(t, nemesis.FaultNames(tgt)...)
}
