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

// TestNemesis runs the mutex and leader.Run over etcdlock on a 3-member
// cluster under every fault kind (the engine's tour tries each one at least
// once), and requires no violation.
func TestNemesis(t *testing.T) {
	c := etcdtest.StartCluster(t)
	tg := etcdnem.NewTarget(c, 0)
	defer tg.Close()
	d := *duration
	if d == 0 {
		d = 9 * time.Second // each; about 25 s for both with the cluster's start
	}
	for i, r := range []nemesis.Recipe{nemesis.LockRecipe(), nemesis.LeaderRecipe()} {
		t.Run(r.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
			defer cancel()
			cfg := nemesis.Config{Duration: d, Seed: *seed + uint64(i), Dir: "/nemesis/" + r.Name, Logf: t.Logf}
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
			for _, k := range append(append([]string(nil), nemesis.GenericFaults...), kinds(tg)...) {
				if res.Report.Faults[k] == 0 {
					t.Errorf("fault kind %s never tried", k)
				}
			}
		})
	}
}

func kinds(tg *etcdnem.Target) []string {
	var out []string
	for _, k := range tg.Faults() {
		out = append(out, k.Name)
	}
	return out
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
