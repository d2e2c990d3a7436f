package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestWrongServer (issue 24): --servers at a server of another protocol (a
// real net/http server; another of the four lock services) exits 69 within
// connerrtest.WrongWithin, logging what answered and never the password;
// before, every one of these but Redis took the whole --connect-timeout
// (10 s) and said only that no answer came, and Redis's exited 70 with
// "can't parse map reply".
func TestWrongServer(t *testing.T) {
	httpAddr := connerrtest.HTTPServer(t)
	const password = "s3cr3t-zkr-wrongcli"
	etcdAddr := etcdtest.Shared(t).Endpoints()[0]
	pgAddr := fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(t).Port())
	redisAddr := redistest.Start(t).Addr()
	zkAddr := zktest.Shared(t).Addrs()[0]
	for _, c := range []struct {
		backend, servers, says string
	}{
		{"ZooKeeper", httpAddr, "is not a ZooKeeper server: an HTTP server answered (HTTP/1.1 4"},
		{"ZooKeeper", etcdAddr, "is not a ZooKeeper server: an etcd server answered"},
		{"etcd", "etcd://" + httpAddr + "/x", "is not an etcd server: an HTTP server answered (HTTP/1.1 4"},
		{"etcd", "etcd://" + pgAddr + "/x", "is not an etcd server: a PostgreSQL server answered"},
		{"PostgreSQL", "postgres://cron:" + password + "@" + httpAddr + "/app", "is not a PostgreSQL server: an HTTP server answered (HTTP/1.1 4"},
		{"PostgreSQL", "postgres://cron:" + password + "@" + redisAddr + "/app", "is not a PostgreSQL server: a Redis server answered"},
		{"Redis", "redis://:" + password + "@" + httpAddr + "/0", "is not a Redis server: an HTTP server answered (HTTP/1.1 4"},
		{"Redis", "redis://:" + password + "@" + zkAddr + "/0", "is not a Redis server: a ZooKeeper server answered"},
	} {
		t.Run(c.backend, func(t *testing.T) {
			shown := strings.ReplaceAll(c.servers, password, "xxxxx") // no password in the test's output either
			begin := time.Now()
			p := start(t, nil, t.TempDir(), "lock", "--servers", c.servers, "--connect-timeout", "10s", "/cli-test/wrong", "--", "true")
			p.expect(exitUnavailable, 30*time.Second)
			took := time.Since(begin)
			msg := "no " + c.backend + " server at --servers: another server answered there (check the address and port)"
			if r := p.logged(msg); r == nil || !strings.Contains(fmt.Sprint(r["err"]), c.says) {
				t.Errorf("%s: the log does not say %q:\n%s", shown, c.says, p.stderr)
			}
			if strings.Contains(p.stderr.String(), password) {
				t.Error("the password is in the log")
			}
			if took > connerrtest.WrongWithin {
				t.Errorf("%s: exited after %v, want at most %v (--connect-timeout 10s)", shown, took, connerrtest.WrongWithin)
			}
			t.Logf("%s: exit 69 after %v", shown, took.Round(time.Millisecond))
		})
	}
}
