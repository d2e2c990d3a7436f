package etcdnem_test

import (
	"flag"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest/etcdnem"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
)

// The short runs are part of make test; a longer one is
//
//	go test -run TestNemesis -etcdnem.duration 3m -etcdnem.seed 7 -etcdnem.out /tmp/etcdnem ./etcdtest/etcdnem/
var (
	duration = flag.Duration("etcdnem.duration", 0, "fault phase of each TestNemesis run (0: the short runs of make test)")
	seed     = flag.Uint64("etcdnem.seed", 22, "seed of TestNemesis's runs")
	outDir   = flag.String("etcdnem.out", "", "directory for the runs' histories (JSON), if set; a failing run's goes to the temporary directory otherwise")
)

// The short runs split etcd's own fault kinds between the two recipes (each
// run has every generic client fault): the engine's tour tries each kind
// of a run once, and the server faults, one at a time with a restart
// after each kill, would not all fit one short run.
var shortKinds = [][]string{
	{etcdnem.FaultKillLeader, etcdnem.FaultPartition, etcdnem.FaultRevoke},
	{etcdnem.FaultKillMember, etcdnem.FaultPauseMember, etcdnem.FaultCompact},
}

// TestNemesis runs the mutex and leader.Run over etcdlock on a 3-member
// cluster under every fault kind (the engine's tour tries each one at least
// once), and requires no violation and some grant in each run.
func TestNemesis(t *testing.T) {
	c := etcdtest.StartCluster(t)
	tg := etcdnem.NewTarget(c, 0)
	defer tg.Close()
	var took nemtest.Kinds
	for i, r := range []nemesis.Recipe{nemesis.LockRecipe(), nemesis.LeaderRecipe()} {
		t.Run(r.Name, func(t *testing.T) {
			cfg := nemesis.Config{Duration: *duration, Seed: *seed + uint64(i), Dir: "/nemesis/" + r.Name}
			if cfg.Duration == 0 {
				cfg.Duration, cfg.FaultEvery = 7*time.Second, 300*time.Millisecond
				cfg.Faults = append(append([]string(nil), nemesis.GenericFaults...), shortKinds[i]...)
			}
			took.Add(nemtest.Run(t, tg, r, cfg, *outDir).Report)
		})
	}
	took.Require(t, nemesis.FaultNames(tg)...)
}
