package etcdnem_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest/etcdnem"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
)

// The short runs are part of make test; a longer one is
//
//	go test -run TestNemesis -etcdnem.duration 3m -etcdnem.seed 7 -etcdnem.out /tmp/etcdnem ./etcdtest/etcdnem/
var (
	duration = flag.Duration("etcdnem.duration", 0, "fault phase of each TestNemesis run (0: the short runs of make test)")
	seed     = flag.Uint64("etcdnem.seed", 22, "seed of TestNemesis's runs")
	outDir   = flag.String("etcdnem.out", "", "directory for the runs' histories (JSON), if set")
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
// once), and requires no violation.
func TestNemesis(t *testing.T) {
	c := etcdtest.StartCluster(t)
	tg := etcdnem.NewTarget(c, 0)
	defer tg.Close()
	tried := map[string]int{}
	for i, r := range []nemesis.Recipe{nemesis.LockRecipe(), nemesis.LeaderRecipe()} {
		t.Run(r.Name, func(t *testing.T) {
			cfg := nemesis.Config{Duration: *duration, Seed: *seed + uint64(i), Dir: "/nemesis/" + r.Name, Logf: t.Logf}
			if cfg.Duration == 0 {
				cfg.Duration, cfg.FaultEvery = 7*time.Second, 300*time.Millisecond
				cfg.Faults = append(append([]string(nil), nemesis.GenericFaults...), shortKinds[i]...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+3*time.Minute)
			defer cancel()
			res, err := nemesis.RunTarget(ctx, tg, r, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res.Report.Summary())
			if *outDir != "" {
				saveHistory(t, res, filepath.Join(*outDir, "etcd-"+r.Name+".json"))
			}
			for _, v := range res.Report.Violations {
				t.Error(v)
			}
			for k, n := range res.Report.Faults {
				tried[k] += n - res.Report.FaultsFailed[k] // tried and took effect
			}
		})
	}
	for _, k := range nemesis.FaultNames(tg) {
		if tried[k] == 0 {
			t.Errorf("fault kind %s never injected: not tried, or every attempt failed (took effect: %v)", k, tried)
		}
	}
}

func saveHistory(t *testing.T, res *nemesis.Result, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := res.History.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
}
