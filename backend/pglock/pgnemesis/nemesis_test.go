package pgnemesis

import (
	"context"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

var (
	seed     = flag.Uint64("nemesis.seed", 1, "seed of the short nemesis runs")
	duration = flag.Duration("nemesis.duration", 6*time.Second, "fault phase of each short nemesis run")
	allKinds = flag.Bool("nemesis.all", false, "every fault kind in each run (the long run), not half of the target's own")
)

// TestNemesis is the short seeded run of PostgreSQL under the nemesis: the
// lock recipe, then leader.Run, each with four pglock clients (TTL 2 s)
// behind their proxies on a server of its own, every generic client fault
// (cut, blackhole, latency, pause) and half of the target's own kinds
// each, so that every kind is tried at least once (each run begins with a
// tour of its kinds). No violation is allowed. First, on the same server,
// it checks why there is no PgBouncer variant (checkBouncerRefused) and
// drives each of the target's fault kinds by hand (checkPrimitives).
func TestNemesis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := pgtest.LaunchLocal(ctx) // its own server, never PG_TEST_DSN's: the faults restart and pause it
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tg, err := New(ctx, srv, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	checkBouncerRefused(t, tg.dsn)
	t.Run("primitives", func(t *testing.T) { checkPrimitives(t, tg) })

	own := [][]string{{FaultTerminate, FaultRestartFast}, {FaultRestartImmediate, FaultPauseServer}}
	var took nemtest.Kinds
	for i, r := range []nemesis.Recipe{nemesis.LockRecipe(), nemesis.LeaderRecipe()} {
		t.Run(r.Name, func(t *testing.T) {
			kinds := append(slices.Clone(nemesis.GenericFaults), own[i]...)
			if *allKinds {
				kinds = append(slices.Clone(nemesis.GenericFaults), own[0]...)
				kinds = append(kinds, own[1]...)
			}
			res := nemtest.Run(t, tg, r, nemesis.Config{Seed: *seed + uint64(i), Duration: *duration,
				FaultEvery: 300 * time.Millisecond, Faults: kinds}, "")
			took.Add(res.Report)
			if res.Report.Writes[RegRow][nemesis.Accepted] == 0 {
				t.Errorf("no write accepted by the %s register", RegRow)
			}
		})
	}
	took.Require(t, append(slices.Clone(nemesis.GenericFaults), FaultTerminate, FaultRestartFast, FaultRestartImmediate, FaultPauseServer)...)
}
