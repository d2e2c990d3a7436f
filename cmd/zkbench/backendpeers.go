package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// The peers of the library's other backends: etcd, PostgreSQL advisory
// locks, Redis and Kubernetes Leases (packages etcdlock, pglock,
// redislock, k8slease), driven through recipe.Lock as ours is, each on a
// server started by its test harness with Launch (or the one named by
// ETCD_TEST_ENDPOINTS, PG_TEST_DSN, REDIS_TEST_ADDR, K8S_TEST_KUBECONFIG).
// They run the uncontended and contended workloads only: the waiters
// workloads wait until ZooKeeper lists every queued node. No packet
// counts either (mntr is ZooKeeper's), no server CPU, and no -latency:
// they connect directly, on loopback.

// isBackendPeer reports whether name is one of the other backends' peers.
func isBackendPeer(name string) bool {
	return name == "etcd" || name == "pg" || name == "redis" || name == "k8s"
}

// startBackendPeer starts the server of the backend peer name and returns
// the peer, whose locks live under root (etcd's key prefix; the others
// have a server or database of their own), and how to stop the server.
// Every session asks for a lease of sessionTimeout, as the ZooKeeper
// peers' sessions do.
func startBackendPeer(ctx context.Context, name, root string) (*goPeer, func(), error) {
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	var connect func(ctx context.Context) (goClient, error)
	var stop func()
	switch name {
	case "etcd":
		srv, err := etcdtest.Launch(ctx)
		if err != nil {
			return nil, nil, err
		}
		url := srv.URL(root)
		connect = func(ctx context.Context) (goClient, error) {
			s, err := etcdlock.Connect(ctx, url, etcdlock.WithTTL(sessionTimeout), etcdlock.WithLogger(discard))
			if err != nil {
				return nil, err
			}
			return lockClient{mk: func(p string) (recipe.Lock, error) { return etcdlock.New(s, p) }, end: func() { s.Close() }}, nil
		}
		stop = func() { srv.Close() }
	case "pg":
		srv, err := pgtest.Launch(ctx)
		if err != nil {
			return nil, nil, err
		}
		dsn, err := srv.NewDatabase(ctx, "zkbench")
		if err != nil {
			srv.Close()
			return nil, nil, err
		}
		connect = func(ctx context.Context) (goClient, error) {
			s, err := pglock.Connect(ctx, dsn, pglock.WithTTL(sessionTimeout), pglock.WithLogger(discard))
			if err != nil {
				return nil, err
			}
			return lockClient{mk: func(p string) (recipe.Lock, error) { return pglock.New(s, p) }, end: func() { s.Close() }}, nil
		}
		stop = func() {
			_ = srv.DropDatabase(context.Background(), dsn)
			srv.Close()
		}
	case "redis":
		srv, err := redistest.Launch(ctx)
		if err != nil {
			return nil, nil, err
		}
		connect = func(ctx context.Context) (goClient, error) {
			s, err := redislock.Connect(ctx, srv.URL(), redislock.WithTTL(sessionTimeout),
				redislock.WithKeyPrefix(srv.KeyPrefix()), redislock.WithLogger(discard))
			if err != nil {
				return nil, err
			}
			return lockClient{mk: func(p string) (recipe.Lock, error) { return redislock.New(s, p) }, end: func() { s.Close() }}, nil
		}
		stop = func() { srv.Close() }
	case "k8s":
		var err error
		if connect, stop, err = startK8s(ctx, discard); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("no backend peer %q", name)
	}
	// No server CPU: the harnesses do not expose their servers' processes
	// (and PostgreSQL serves each connection from a process of its own).
	p := &goPeer{name: name, meter: meter{clientPID: os.Getpid()}, connect: func(ctx context.Context, _ []string, _ zk.Dialer) (goClient, error) { return connect(ctx) }}
	return p, stop, nil
}

// lockClient is one session of a backend whose locks implement recipe.Lock.
type lockClient struct {
	mk  func(path string) (recipe.Lock, error)
	end func()
}

func (c lockClient) close() { c.end() }
func (c lockClient) newLock(path string) (goLock, error) {
	l, err := c.mk(path)
	if err != nil {
		return nil, err
	}
	return leaseLock{l}, nil
}
