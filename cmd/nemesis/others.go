package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest/etcdnem"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8snem"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/backend/pglock/pgnemesis"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redisnemesis"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// The etcd, PostgreSQL, Redis and Kubernetes entries of the registry: each launches
// its servers through its module's test harness and runs the
// backend-neutral recipes (the Lock and leader.Run over it).
func init() {
	backends["etcd"] = backend{launch: launchEtcd, recipes: withMembers(neutral()), defaults: "mutex,leader,multilock"}
	backends["pg"] = backend{launch: launchPG, recipes: neutral(), defaults: "mutex,leader,multilock"}
	backends["redis"] = backend{launch: launchRedis, recipes: neutral(), defaults: "mutex,leader,multilock"}
	backends["k8s"] = backend{launch: launchK8s, recipes: neutral(), defaults: "mutex,leader,multilock"}
}

// launchEtcd starts a 3-member cluster (every member behind proxies the
// target partitions) with etcdnem's default lease TTL.
func launchEtcd(ctx context.Context, _ options) (*launched, error) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := etcdtest.LaunchCluster(lctx)
	if err != nil {
		return nil, err
	}
	t := etcdnem.NewTarget(c, 0)
	return &launched{target: t,
		about: fmt.Sprintf("%d etcd members %s, %v leases", c.Size(), strings.Join(c.DirectEndpoints(), ","), etcdnem.DefaultTTL),
		close: func() error { return errors.Join(t.Close(), c.Close()) }}, nil
}

// launchPG starts a PostgreSQL server of its own (the nemesis restarts,
// pauses and terminates it; never PG_TEST_DSN's) with pgnemesis's TTL.
func launchPG(ctx context.Context, _ options) (*launched, error) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := pgtest.LaunchLocal(lctx)
	if err != nil {
		return nil, err
	}
	t, err := pgnemesis.New(lctx, srv, pgnemesis.Config{})
	if err != nil {
		return nil, errors.Join(err, srv.Close())
	}
	return &launched{target: t,
		about: fmt.Sprintf("1 PostgreSQL server (port %d), %v TTL, the fenced row in the same server", srv.Port(), pgnemesis.DefaultTTL),
		close: func() error { return errors.Join(t.Close(), srv.Close()) }}, nil
}

// launchRedis starts a Redis server of its own (the nemesis kills, pauses
// and keeps it busy; never REDIS_TEST_ADDR's) with the AOF fsynced on
// every write.
func launchRedis(ctx context.Context, _ options) (*launched, error) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t, stop, err := redisnemesis.Launch(lctx, 0)
	if err != nil {
		return nil, err
	}
	return &launched{target: t, about: fmt.Sprintf("1 Redis server %s (appendonly yes, appendfsync always), %v TTL", t.Addr(), redisnemesis.DefaultTTL), close: stop}, nil
}

// launchK8s starts a local Kubernetes API server over its own etcd (the
// nemesis kills and freezes both; never K8S_TEST_KUBECONFIG's cluster)
// with k8snem's lease duration.
func launchK8s(ctx context.Context, _ options) (*launched, error) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t, stop, err := k8snem.Launch(lctx, 0)
	if err != nil {
		return nil, err
	}
	return &launched{target: t,
		about: fmt.Sprintf("1 kube-apiserver %s over 1 etcd member, %v lease duration, namespace %s", k8stest.Version, k8snem.DefaultLeaseDuration, t.Namespace()),
		close: stop}, nil
}
