package k8snem

import (
	"context"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

var (
	seed     = flag.Uint64("nemesis.seed", 97, "seed of the nemesis runs (the leader run uses seed+1)")
	duration = flag.Duration("nemesis.duration", 5*time.Second, "fault phase of each nemesis run")
	every    = flag.Duration("nemesis.every", 300*time.Millisecond, "mean wait between two faults")
	allKinds = flag.Bool("nemesis.all", false, "every run injects every fault kind (for long runs; the short run splits them)")
	outDir   = flag.String("nemesis.out", "", "directory for each run's history (default: only a failing run's, in the temporary directory)")
)

// The package's tests share one local cluster (they run one after the
// other, and the nemesis's faults heal before a run ends): starting one
// costs seconds. TestMain closes it after the tests.
var (
	clusterOnce sync.Once
	cluster     *k8stest.Cluster
	clusterErr  error
)

func TestMain(m *testing.M) {
	serverkit.MainThen(m, func() {
		if cluster != nil {
			_ = cluster.Close()
		}
		k8stest.StopShared() // klog's flush goroutine
	})
}

// ownTarget returns a Target (closed at the test's cleanup) on the
// package's cluster, failing the test with the install hint when there is
// no cluster.
func ownTarget(t *testing.T) *Target {
	t.Helper()
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cluster, clusterErr = k8stest.Launch(ctx)
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg, err := NewTarget(ctx, cluster, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Errorf("closing the target: %v", err)
		}
	})
	return tg
}

// TestNemesis is the short seeded run of k8slease under the nemesis:
// its Mutex (LockRecipe) and leader.Run over it (LeaderRecipe), four
// clients with a 3 s lease duration, each behind its own fault proxy, the
// API server killed and restarted and frozen past the lease, etcd killed
// and restarted under it, the held Lease deleted and taken by an operator,
// plus the engine's client faults (cut, blackhole, latency, a holder
// paused past T). Every kind is tried at least once. A longer run:
//
//	go test -race -run TestNemesis -timeout 30m -nemesis.duration 3m -nemesis.all -nemesis.out /tmp/k8s-nemesis ./k8snem
func TestNemesis(t *testing.T) {
	tg := ownTarget(t)
	// Each run tours its kinds first, each waiting for its target to be
	// free: the server kinds are split between the two runs, and the seed
	// (97) puts them last in each run's tour (the mutex run: kill-apiserver;
	// the leader run: kill-etcd, then pause-apiserver), since the store
	// faults wait while the API server is down and a restart of it takes up
	// to 10 s on a loaded machine: the tour fits a 5 s run.
	runs := []struct {
		r     nemesis.Recipe
		kinds []string
	}{
		{nemesis.LockRecipe(), []string{FaultKillAPIServer, FaultDeleteLease, FaultTakeLease,
			nemesis.FaultCut, nemesis.FaultLatency, nemesis.FaultPauseClient}},
		{nemesis.LeaderRecipe(), []string{FaultPauseAPIServer, FaultKillEtcd, FaultDeleteLease,
			nemesis.FaultBlackhole, nemesis.FaultLatency, nemesis.FaultPauseClient}},
	}
	var took nemtest.Kinds
	for i, run := range runs {
		if *allKinds {
			run.kinds = nil
		}
		t.Run(run.r.Name, func(t *testing.T) {
			res := nemtest.Run(t, tg, run.r, nemesis.Config{Seed: *seed + uint64(i), Duration: *duration,
				FaultEvery: *every, Faults: run.kinds}, *outDir)
			took.Add(res.Report)
		})
	}
	took.Require(t, nemesis.FaultNames(tg)...)
}
