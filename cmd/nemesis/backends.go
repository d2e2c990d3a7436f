package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// launched is one backend's servers, running, as its runs need them.
type launched struct {
	target nemesis.Target
	// about says what runs, for the header: the servers and their version.
	about string
	// keep keeps the servers' directories (logs, data) when they are
	// closed, after a run with a violation, and says where ("" if the
	// backend keeps none).
	keep func() string
	// close closes the target and stops the servers.
	close func() error
}

// backend is one entry of the registry: how to launch its servers, the
// recipes it can run, and those it runs by default.
type backend struct {
	launch   func(ctx context.Context, o options) (*launched, error)
	recipes  map[string]nemesis.Recipe
	defaults string // -recipes when not given
}

// order is the order in which -backend all runs the backends.
var order = []string{"zk", "etcd", "pg", "redis", "k8s"}

// backends is the registry, from -backend's name to its entry; others.go
// adds etcd, PostgreSQL, Redis and Kubernetes, whose targets come from
// their modules.
var backends = map[string]backend{
	"zk": {launch: launchZK, recipes: zkRecipes(), defaults: "mutex,rwlock,semaphore,election,latch,multilock"},
}

// neutral is the recipes every backend runs: its Lock (mutex), leader.Run
// over it (leader) and a multi-lock over two of them (multilock).
func neutral() map[string]nemesis.Recipe {
	return map[string]nemesis.Recipe{"mutex": nemesis.LockRecipe(), "leader": nemesis.LeaderRecipe(),
		"multilock": nemesis.MultiLockRecipe()}
}

// zkRecipes is what ZooKeeper runs: its own recipes and leader.Run.
func zkRecipes() map[string]nemesis.Recipe {
	return map[string]nemesis.Recipe{"mutex": nemesis.Mutex(), "rwlock": nemesis.RWLock(),
		"semaphore": nemesis.Semaphore(2), "election": nemesis.Election(), "latch": nemesis.Latch(),
		"leader": nemesis.LeaderRecipe(), "multilock": nemesis.MultiLockRecipe(),
		// not in the default list: the semaphore whose limit is stored
		// with its directory (half its grants by OpenSemaphore)
		"stored-semaphore": nemesis.StoredSemaphore(2),
		// not in the default list: a recipe that is wrong on purpose, to
		// see the command report a violation and keep the evidence
		"broken-mutex": nemesis.Broken(),
		// not in the default list either: group membership
		// (nemesis.RunMembership), with its own checks
		membersName: nemesis.Members()}
}

// names lists the backends of the registry, in order.
func names() []string {
	var out []string
	for _, n := range order {
		if _, ok := backends[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// chosen is the backends -backend names: one, or all of the registry.
func chosen(name string) ([]string, error) {
	if name == "all" {
		return names(), nil
	}
	if _, ok := backends[name]; ok {
		return []string{name}, nil
	}
	for _, n := range order {
		if n == name {
			return nil, fmt.Errorf("backend %q is not wired into this build yet (wired: %s)", name, strings.Join(names(), ", "))
		}
	}
	return nil, fmt.Errorf("unknown backend %q (zk, etcd, pg, redis, k8s or all)", name)
}

// launchZK starts an ensemble of -ensemble servers through zktest.
func launchZK(ctx context.Context, o options) (*launched, error) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := zktest.Launch(lctx, zktest.WithEnsemble(o.servers))
	if err != nil {
		return nil, err
	}
	t := nemesis.ZooKeeperTarget(cl)
	return &launched{target: t,
		about: fmt.Sprintf("%d servers %s (ZooKeeper %s), 2 s sessions", len(cl.Addrs()), strings.Join(cl.Addrs(), ","), version(ctx, cl)),
		keep: func() string {
			if d := cl.KeepDirs(); d != "" {
				return "server logs and data kept in " + d
			}
			return "no server directories to keep (" + cl.Provider() + " provider)"
		},
		close: func() error {
			t.Close()
			return cl.Close()
		}}, nil
}
