package etcdnem_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest/etcdnem"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
)

// TestMembership runs group membership (etcdlock.NewGroup) on a 3-member
// cluster in one short run: every generic fault, and kill-leader,
// partition-member and revoke-lease (of a member's lease); the other etcd
// kinds are TestNemesis's and cmd/nemesis's (docs/reliability.md). It
// requires no violation, some views, updates and registrations made again.
func TestMembership(t *testing.T) {
	c := etcdtest.StartCluster(t)
	tg := etcdnem.NewTarget(c, 0)
	defer tg.Close()
	mt := tg.Members()
	var took nemtest.Kinds
	for i, own := range shortKinds[:1] { // kill-member, pause-member and compact: TestNemesis's, and the group tests'
		t.Run(strings.Join(own, ","), func(t *testing.T) {
			cfg := nemesis.Config{Duration: *duration, Seed: *seed + 10 + uint64(i), Dir: "/nemesis/members", Logf: t.Logf}
			if cfg.Duration == 0 {
				cfg.Duration, cfg.FaultEvery = 6*time.Second, 300*time.Millisecond
				cfg.Faults = append(slices.Clone(nemesis.GenericFaults), own...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+nemtest.RunTimeout)
			defer cancel()
			start := time.Now()
			res, err := nemesis.RunMembership(ctx, mt, cfg)
			if err != nil {
				t.Fatalf("seed %d: %v", cfg.Seed, err)
			}
			rep := res.Report
			t.Logf("members on etcd, seed %d, in %v: %s", cfg.Seed, time.Since(start).Round(time.Millisecond), rep.Summary())
			for _, f := range res.History.Faults {
				if f.Err != "" {
					t.Logf("fault %s on %s at %v failed: %s", f.Kind, f.Target, f.Start, f.Err)
				}
			}
			if len(rep.Violations) > 0 {
				where := "history NOT written"
				if f, err := os.CreateTemp("", fmt.Sprintf("nemesis-members-etcd-seed%d-*.json", cfg.Seed)); err == nil {
					if err := res.History.WriteJSON(f); err == nil {
						where = "history in " + f.Name()
					}
					f.Close()
				}
				t.Errorf("%d violations (%s):\n%s", len(rep.Violations), where, strings.Join(rep.Violations, "\n"))
			}
			if rep.Views == 0 || rep.Calls[nemesis.CallUpdate] == 0 || rep.Registrations <= rep.Calls[nemesis.CallJoin] {
				t.Errorf("the run tested little: %d views, %d updates, %d registrations for %d joins", rep.Views, rep.Calls[nemesis.CallUpdate], rep.Registrations, rep.Calls[nemesis.CallJoin])
			}
			took.Add(&nemesis.Report{Faults: rep.Faults, FaultsFailed: rep.FaultsFailed})
		})
	}
	took.Require(t, append(slices.Clone(nemesis.GenericFaults), shortKinds[0]...)...)
}
