package main

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// connectors open a session of each backend with the URL of a real
// server (ZooKeeper's: its host list), with ttl (0: the default; ZooKeeper
// has none), and close it.
var connectors = map[string]func(ctx context.Context, servers string, ttl time.Duration) error{
	"ZooKeeper": func(ctx context.Context, servers string, _ time.Duration) error {
		s, err := zookeeper.Connect(ctx, []string{servers})
		if err == nil {
			s.Close()
		}
		return err
	},
	"etcd": func(ctx context.Context, servers string, ttl time.Duration) error {
		var opts []etcdlock.Option
		if ttl != 0 {
			opts = append(opts, etcdlock.WithTTL(ttl))
		}
		s, err := etcdlock.Connect(ctx, servers, opts...)
		if err == nil {
			s.Close()
		}
		return err
	},
	"PostgreSQL": func(ctx context.Context, servers string, ttl time.Duration) error {
		var opts []pglock.Option
		if ttl != 0 {
			opts = append(opts, pglock.WithTTL(ttl))
		}
		s, err := pglock.Connect(ctx, servers, opts...)
		if err == nil {
			s.Close()
		}
		return err
	},
	"Redis": func(ctx context.Context, servers string, ttl time.Duration) error {
		var opts []redislock.Option
		if ttl != 0 {
			opts = append(opts, redislock.WithTTL(ttl))
		}
		s, err := redislock.Connect(ctx, servers, opts...)
		if err == nil {
			s.Close()
		}
		return err
	},
}

// TestConnectVocabulary (issue 37 item 9): the same event gives the same
// answer on every backend, against its real server: a Connect whose ctx
// was cancelled matches context.Canceled and not recipe.ErrUnreachable
// (ZooKeeper's matched both); a TTL the backend refuses is
// recipe.ErrBadOption worded "<package>: WithTTL(<value>): want <rule>"
// (it was worded three ways); a server where nothing listens is
// recipe.ErrUnreachable worded "recipe: connect: server unreachable: ..."
// (etcd's said "etcdlock: etcd unreachable", ZooKeeper's had no "connect");
// a server that accepts and says nothing until ctx's deadline is both
// recipe.ErrUnreachable and context.DeadlineExceeded, in the same words
// (PostgreSQL's was the deadline alone, Redis's neither: "i/o timeout").
func TestConnectVocabulary(t *testing.T) {
	t.Parallel()
	servers := map[string]string{"ZooKeeper": strings.Join(zktest.Shared(t).Servers(), ",")}
	for _, ls := range lockServers {
		u, addr := ls.start(t)
		servers[ls.name] = u(addr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does) and says nothing
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a := ln.Addr().String()
	silent := map[string]string{"ZooKeeper": a, "etcd": "etcd://" + a + "/x", "PostgreSQL": "postgres://u@" + a + "/db", "Redis": "redis://" + a}
	badTTL := map[string]time.Duration{"etcd": 1500 * time.Millisecond, "PostgreSQL": time.Millisecond, "Redis": time.Millisecond}
	ttlText := regexp.MustCompile(`^recipe: invalid option: (etcdlock|pglock|redislock): WithTTL\([0-9.]+m?s\): want `)
	for name, connect := range connectors {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := connect(ctx, servers[name], 0)
		if !errors.Is(err, context.Canceled) || errors.Is(err, recipe.ErrUnreachable) {
			t.Errorf("%s: Connect with a cancelled ctx: %v; want context.Canceled, not recipe.ErrUnreachable", name, err)
		}
		nowhere := map[string]string{"ZooKeeper": "127.0.0.1:1", "etcd": "etcd://127.0.0.1:1/x", "PostgreSQL": "postgres://u@127.0.0.1:1/db", "Redis": "redis://127.0.0.1:1"}
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		err = connect(ctx, nowhere[name], 0)
		cancel()
		if !errors.Is(err, recipe.ErrUnreachable) || err == nil || !strings.HasPrefix(err.Error(), "recipe: connect: server unreachable: ") {
			t.Errorf("%s: Connect where nothing listens: %v; want recipe.ErrUnreachable worded \"recipe: connect: server unreachable: ...\"", name, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		err = connect(ctx, silent[name], 0)
		cancel()
		if !errors.Is(err, recipe.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || err == nil || !strings.HasPrefix(err.Error(), "recipe: connect: server unreachable: ") {
			t.Errorf("%s: Connect to a silent server until ctx's deadline: %v; want recipe.ErrUnreachable and context.DeadlineExceeded, worded \"recipe: connect: server unreachable: ...\"", name, err)
		}
		if ttl, ok := badTTL[name]; ok {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := connect(ctx, servers[name], ttl)
			cancel()
			if !errors.Is(err, recipe.ErrBadOption) || err == nil || !ttlText.MatchString(err.Error()) {
				t.Errorf("%s: Connect with TTL %v: %v; want recipe.ErrBadOption matching %s", name, ttl, err, ttlText)
			}
		}
	}
}
