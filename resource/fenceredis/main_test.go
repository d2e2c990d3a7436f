package fenceredis_test

import (
	"context"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestMain runs the tests with goleak and stops the example's server.
func TestMain(m *testing.M) { redistest.Main(m) }

// env is one test's server (REDIS_TEST_ADDR: a key prefix of its own on
// that one, deleted at the end) and a client that does not retry.
type env struct {
	srv    *redistest.Server
	cli    *redis.Client
	prefix string // every key of the test starts with it
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Start(t)
	return &env{srv: srv, cli: client(t, srv.Addr()), prefix: srv.KeyPrefix()}
}

// client is a client of addr without retries, closed at the test's end.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fence returns a Fence on the env's prefix + "fence:".
func (e *env) fence(t *testing.T) *fenceredis.Fence {
	t.Helper()
	f, err := fenceredis.New(e.cli, e.prefix+"fence:")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// keys returns the keys under the env's prefix, sorted.
func (e *env) keys(t *testing.T) []string {
	t.Helper()
	ks, err := e.cli.Keys(context.Background(), e.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(ks)
	return ks
}

func (e *env) get(t *testing.T, key string) string {
	t.Helper()
	v, err := e.cli.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// proxied returns a client of the server whose connection goes through a
// FaultProxy of its own.
func (e *env) proxied(t *testing.T) (*redis.Client, *serverkit.FaultProxy) {
	t.Helper()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	addr, err := p.Listen(e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return client(t, addr), p
}
