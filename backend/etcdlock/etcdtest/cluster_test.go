package etcdtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// memberClient is a client of member i alone, through its front proxy (as
// the library's clients reach it).
func memberClient(t *testing.T, c *etcdtest.Cluster, i int) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()[i : i+1], DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// put writes key through cli within d, trying again after an error (a
// proposal made during an election can be lost: the server then answers
// "request timed out").
func put(cli *clientv3.Client, key string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(actx, key, "v")
		acancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// One test for the whole harness, so the cluster starts once: kill and
// restart of the leader, a pause, a partition (both ways: the cut-off
// member can't forward a keep-alive to the leader over a link it dials
// itself) and a compaction.
func TestCluster(t *testing.T) {
	c := etcdtest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := c.Client(t)
	if c.Size() != 3 || len(c.Endpoints()) != 3 || !strings.HasPrefix(c.URL("/p"), "etcd://") {
		t.Fatalf("size %d, endpoints %v, URL %s", c.Size(), c.Endpoints(), c.URL("/p"))
	}
	for i := range c.Size() {
		if err := put(memberClient(t, c, i), "/k", 5*time.Second); err != nil {
			t.Fatalf("put through member %d: %v", i, err)
		}
	}

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if c.Running(leader) {
		t.Fatal("a killed member runs")
	}
	if err := put(admin, "/k", 15*time.Second); err != nil {
		t.Fatalf("put with the leader killed: %v", err)
	}
	if next, err := c.Leader(ctx); err != nil || next == leader {
		t.Fatalf("leader after the kill: %d, %v (killed %d)", next, err, leader)
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := put(memberClient(t, c, leader), "/k", 10*time.Second); err != nil {
		t.Fatalf("put through the restarted member: %v", err)
	}

	follower := (leader + 1) % c.Size()
	if err := c.Pause(follower); err != nil {
		t.Fatal(err)
	}
	if err := put(memberClient(t, c, follower), "/k", time.Second); err == nil {
		t.Error("a paused member answered")
	}
	if err := put(admin, "/k", 10*time.Second); err != nil {
		t.Errorf("put with a member paused: %v", err)
	}
	if err := c.Resume(follower); err != nil {
		t.Fatal(err)
	}

	checkPartition(t, c, admin, follower)

	if err := c.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	checkCompact(t, c, admin)
}

// checkPartition cuts member i off and checks that neither its clients nor
// it reach the others, then heals.
func checkPartition(t *testing.T, c *etcdtest.Cluster, admin *clientv3.Client, i int) {
	t.Helper()
	g, err := admin.Grant(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition(i); err != nil {
		t.Fatal(err)
	}
	if err := put(memberClient(t, c, i), "/k", time.Second); err == nil {
		t.Error("a client reached a cut-off member")
	}
	// A keep-alive sent to the cut-off member itself (its own port, which
	// no client proxy stands before) is forwarded to the leader over a
	// connection the member dials: it fails only if that link is cut too.
	direct, err := clientv3.New(clientv3.Config{Endpoints: c.DirectEndpoints()[i : i+1], DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	kctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = direct.KeepAliveOnce(kctx, g.ID)
	cancel()
	if err == nil {
		t.Error("a keep-alive went from a cut-off member to the leader")
	}
	if err := put(admin, "/k", 10*time.Second); err != nil {
		t.Errorf("put with a member cut off: %v", err)
	}
	c.Heal()
	if err := put(memberClient(t, c, i), "/k", 15*time.Second); err != nil {
		t.Fatalf("member not reachable after the heal: %v", err)
	}
}

// checkCompact compacts at the current revision and checks that a watch
// from before it is refused.
func checkCompact(t *testing.T, c *etcdtest.Cluster, admin *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := put(admin, "/k", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rev, err := c.Compact(ctx)
	if err != nil || rev < 2 {
		t.Fatalf("compact: %d, %v", rev, err)
	}
	wr := <-admin.Watch(ctx, "/k", clientv3.WithRev(rev-1))
	if !errors.Is(wr.Err(), rpctypes.ErrCompacted) || wr.CompactRevision != rev {
		t.Fatalf("watch from before the compaction: %v, compact revision %d, want %d", wr.Err(), wr.CompactRevision, rev)
	}
}

// Without a binary, LaunchCluster fails with ErrNoServer and the install
// hint (never a skip), even with ETCD_TEST_ENDPOINTS set: a server it can't
// control is no cluster for fault tests.
func TestClusterNoServer(t *testing.T) {
	t.Setenv(etcdtest.EnvEndpoints, "127.0.0.1:2379")
	t.Setenv(etcdtest.EnvBinary, "/nonexistent/etcd")
	_, err := etcdtest.LaunchCluster(context.Background())
	if !errors.Is(err, etcdtest.ErrNoServer) || !strings.Contains(err.Error(), etcdtest.ClusterInstallHint) ||
		strings.Contains(err.Error(), "to use a running server") {
		t.Fatalf("LaunchCluster without a binary: %v, want ErrNoServer with the cluster's install hint (no running server offered)", err)
	}
}

// An ended ctx is not a missing install: LaunchCluster's error then wraps
// ctx's error, not ErrNoServer (Ctrl-C at cmd/nemesis's start said
// "install etcd").
func TestClusterInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	_, err := etcdtest.LaunchCluster(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, etcdtest.ErrNoServer) || !strings.Contains(err.Error(), "interrupt signal received") {
		t.Fatalf("LaunchCluster with an ended ctx: %v, want context.Canceled with its cause, not ErrNoServer", err)
	}
}
