package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// lockServer is a real server of one of the other backends, started by
// that backend's test harness.
type lockServer struct {
	name string // as zkrecipes names the backend in its log
	// start returns a namespace no other test uses on a running server:
	// url gives its URL through hostport (the server's addr, or a proxy in
	// front of it).
	start func(t *testing.T) (url func(hostport string) string, addr string)
	// badURL is a URL of the scheme that the backend refuses; unreachable
	// one where nothing listens.
	badURL, unreachable string
}

var lockServers = []lockServer{
	{
		name: "etcd",
		start: func(t *testing.T) (func(string) string, string) {
			srv := etcdtest.Shared(t)
			prefix := etcdtest.Prefix(t, srv)
			return func(hp string) string { return "etcd://" + hp + prefix }, srv.Endpoints()[0]
		},
		badURL:      "etcd://127.0.0.1:notaport/x",
		unreachable: "etcd://127.0.0.1:1/x",
	},
	{
		name: "PostgreSQL",
		start: func(t *testing.T) (func(string) string, string) {
			u, err := url.Parse(pgtest.Shared(t).Database(t)) // a database of its own
			if err != nil {
				t.Fatal(err)
			}
			return func(hp string) string { v := *u; v.Host = hp; return v.String() }, u.Host
		},
		badURL:      "postgres://cron@127.0.0.1:99999999/app",
		unreachable: "postgres://cron:secret@127.0.0.1:1/app",
	},
	{
		name: "Redis",
		start: func(t *testing.T) (func(string) string, string) {
			srv := redistest.Start(t)
			// On a server named by REDIS_TEST_ADDR the locks' keys stay:
			// the tests delete those of their lock names (lockName).
			c := srv.Client(t)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				keys, err := c.Keys(ctx, redislock.DefaultKeyPrefix+lockName(t)+":*").Result()
				if err == nil && len(keys) > 0 {
					err = c.Del(ctx, keys...).Err()
				}
				if err != nil {
					t.Errorf("deleting the test's keys: %v", err)
				}
			})
			return func(hp string) string { return "redis://" + hp + "/0" }, srv.Addr()
		},
		badURL:      "redis://127.0.0.1:6379/notadb",
		unreachable: "redis://:secret@127.0.0.1:1",
	},
}

// lockName is the lock's name in a test of another backend: a path, as the
// cron lines use, of the test's own.
func lockName(t *testing.T) string {
	return "/cli-test/" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
}

// grant is what a command run under the lock wrote: its environment.
type grant struct {
	token        uint64
	path, sessID string
}

// grantScript writes the command's environment to file, then waits for
// the file gate (if not empty).
func grantScript(file, gate string) string {
	s := fmt.Sprintf(`echo "$ZKRECIPES_TOKEN $ZKRECIPES_PATH ${ZKRECIPES_SESSION_ID-unset}" > %s`, file)
	if gate != "" {
		s += "; " + gateScript(gate)
	}
	return s
}

func readGrant(t *testing.T, file string) grant {
	t.Helper()
	awaitFile(t, file)
	var g grant
	serverkit.Eventually(t, 5*time.Second, "a grant in "+file, func() bool {
		lines := readLines(t, file)
		if len(lines) != 1 {
			return false
		}
		f := strings.Fields(lines[0])
		if len(f) != 3 {
			return false
		}
		tok, err := strconv.ParseUint(f[0], 10, 64)
		g = grant{token: tok, path: f[1], sessID: f[2]}
		return err == nil
	})
	return g
}

// TestLockOtherBackends: on etcd, PostgreSQL and Redis (named by
// ZK_SERVERS, as a crontab sets it), a holder runs its command with a
// fencing token in ZKRECIPES_TOKEN; while it holds, --wait 0 exits 75 at
// once and --wait 1s after a second, without running their commands, and
// a waiter without --wait waits; when the holder's command is done, the
// waiter runs with a larger token, then --wait 0 gets the lock again with a
// larger one still (nothing was left held).
func TestLockOtherBackends(t *testing.T) {
	t.Parallel()
	for _, ls := range lockServers {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			url, addr := ls.start(t)
			servers, path := url(addr), lockName(t)
			dir := t.TempDir()
			gate, ran := filepath.Join(dir, "gate"), filepath.Join(dir, "ran")
			g1, g2, g3 := filepath.Join(dir, "g1"), filepath.Join(dir, "g2"), filepath.Join(dir, "g3")

			holder := startOn(t, servers, dir, "lock", "--ttl", "5s", path, "--", "sh", "-c", grantScript(g1, gate))
			if r := holder.awaitLog("lock acquired"); r["backend"] != ls.name {
				t.Errorf("the grant's log names backend %v, want %s", r["backend"], ls.name)
			}
			first := readGrant(t, g1)
			if first.token == 0 || first.path != path || first.sessID != "unset" {
				t.Errorf("the command's environment: %+v; want a token, ZKRECIPES_PATH %s and no ZKRECIPES_SESSION_ID", first, path)
			}

			begin := time.Now()
			startOn(t, servers, dir, "lock", "--wait", "0", path, "--", "touch", ran).expect(exitHeld, 30*time.Second)
			t.Logf("--wait 0 refused in %v", time.Since(begin).Round(time.Millisecond))
			startOn(t, servers, dir, "lock", "--wait", "1s", path, "--", "touch", ran).expect(exitHeld, 30*time.Second)
			waiter := startOn(t, servers, dir, "lock", "--ttl", "5s", path, "--", "sh", "-c", grantScript(g2, ""))
			waiter.awaitLog("acquiring the lock")
			if _, err := os.Stat(ran); err == nil {
				t.Fatal("a command ran while the lock was held elsewhere")
			}
			touch(t, gate)
			holder.expect(0, 30*time.Second)
			waiter.expect(0, 30*time.Second)
			startOn(t, servers, dir, "lock", "--wait", "0", path, "--", "sh", "-c", grantScript(g3, "")).expect(0, 30*time.Second)
			second, third := readGrant(t, g2), readGrant(t, g3)
			if !(first.token < second.token && second.token < third.token) {
				t.Errorf("tokens %d, %d, %d: not growing", first.token, second.token, third.token)
			}
		})
	}
}

// TestLockOtherBackendsRefuseBadNames: a name the backend refuses (every
// backend: not valid UTF-8, longer than its MaxNameLen; etcd also: an
// element starting with _lock_) is a usage error (64), reported by the
// backend without a request: also when the server can't be reached (it was
// 69, unavailable: the name was checked after connecting). The message
// names a lock name, and shortens a long one.
func TestLockOtherBackendsRefuseBadNames(t *testing.T) {
	t.Parallel()
	bad := map[string][]string{
		"etcd":       {"/cli-test/_lock_x", "/cli-test/\xff", "/" + strings.Repeat("n", etcdlock.MaxNameLen)},
		"PostgreSQL": {"/cli-test/\xff", "/" + strings.Repeat("n", pglock.MaxNameLen)},
		"Redis":      {"/cli-test/\xff", "/" + strings.Repeat("n", redislock.MaxNameLen)},
	}
	for _, ls := range lockServers {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			url, addr := ls.start(t)
			dir := t.TempDir()
			for i, name := range bad[ls.name] {
				servers := []string{ls.unreachable}
				if i == 0 {
					servers = append(servers, url(addr))
				}
				for _, servers := range servers {
					p := startOn(t, servers, dir, "lock", name, "--", "true")
					p.expect(exitUsage, 30*time.Second)
					r := p.logged("cannot use the lock name")
					if r == nil {
						t.Errorf("%s, %.40q: no clear message:\n%s", servers, name, p.stderr)
						continue
					}
					if msg, _ := r["err"].(string); !strings.Contains(msg, "invalid lock name") || len(msg) > 400 {
						t.Errorf("%s, %.40q: err %.500q, want one naming a lock name, at most 400 bytes", servers, name, msg)
					}
				}
			}
		})
	}
}

// TestLockOtherBackendsBadInput: a URL the backend cannot parse exits 64,
// a server where nothing listens 69 long before --connect-timeout, and
// neither logs the URL's password; a flag that means nothing for the
// backend (or --ttl for ZooKeeper), an unknown scheme, and elect or
// inspect on another backend exit 64 before connecting, naming the flag
// and the backend.
func TestLockOtherBackendsBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, ls := range lockServers {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, nil, dir, "lock", "--servers", ls.badURL, "/cli-test/x", "--", "true")
			p.expect(exitUsage, 30*time.Second)
			if p.logged("bad --servers or option") == nil {
				t.Errorf("%s: no clear message:\n%s", ls.badURL, p.stderr)
			}
			begin := time.Now()
			p = start(t, nil, dir, "lock", "--servers", ls.unreachable, "--connect-timeout", "60s", "/cli-test/x", "--", "true")
			p.expect(exitUnavailable, 50*time.Second)
			if d := time.Since(begin); d > 30*time.Second {
				t.Errorf("%s: a refused connection took %v to report (--connect-timeout 60s)", ls.unreachable, d)
			}
			if r := p.logged("cannot connect to " + ls.name); r == nil || !strings.Contains(fmt.Sprint(r["err"]), "connection refused") {
				t.Errorf("%s: the error does not say the connection was refused:\n%s", ls.unreachable, p.stderr)
			}
			if strings.Contains(p.stderr.String(), "secret") {
				t.Errorf("the password is in the log:\n%s", p.stderr)
			}
		})
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "--rw", "read"}, "--rw means nothing for etcd"},
		{[]string{"lock", "--semaphore", "2"}, "--semaphore means nothing for etcd"},
		{[]string{"lock", "--session-timeout", "5s"}, "--session-timeout means nothing for etcd"},
		{[]string{"lock", "--tolerate-suspension", "0.5"}, "--tolerate-suspension means nothing for etcd"},
		{[]string{"lock", "--ttl", "0s"}, "--ttl 0s must be positive"},
		{[]string{"lock", "--servers", "127.0.0.1:1", "--ttl", "5s"}, "--ttl means nothing for ZooKeeper"},
		{[]string{"lock", "--servers", "mysql://db/app"}, `unknown scheme "mysql"`},
		{[]string{"elect"}, "elect works with ZooKeeper only, and --servers names etcd"},
		{[]string{"inspect", "--semaphore", "2"}, "flag provided but not defined: -semaphore"},
		{[]string{"elect", "--observe", "--id", "a"}, "elect works with ZooKeeper only"},
	} {
		args := append(append([]string{c.args[0], "--servers", "etcd://127.0.0.1:1/x"}, c.args[1:]...), "/cli-test/x")
		if c.args[0] != "inspect" && !slices.Contains(c.args, "--observe") {
			args = append(args, "--", "true")
		}
		p := start(t, nil, dir, args...)
		p.expect(exitUsage, 30*time.Second)
		if !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("zkrecipes %q: stderr lacks %q:\n%s", args, c.want, p.stderr)
		}
	}
}

// TestLockOtherBackendsCutHolder: a holder cut off from its server (a
// partition: nothing goes through, nothing is closed) gives ownership up
// by itself, stops its command (SIGTERM) and exits 79, before the server
// lets another process in; that process gets a larger token.
func TestLockOtherBackendsCutHolder(t *testing.T) {
	t.Parallel()
	for _, ls := range lockServers {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			url, addr := ls.start(t)
			fp := serverkit.NewFaultProxy()
			via := listenProxy(t, fp, addr)
			path, dir := lockName(t), t.TempDir()
			log, pid := filepath.Join(dir, "log"), filepath.Join(dir, "pid")
			g1, g2 := filepath.Join(dir, "g1"), filepath.Join(dir, "g2")
			// A 6 s TTL: every backend gives up at most 2/3 of it after
			// its last answered request, and lets another in no sooner
			// than all of it after: 2 s between the two, room for a
			// loaded machine.
			script := fmt.Sprintf(`trap 'echo terminated >> %[1]s; exit 0' TERM; echo $$ > %[2]s; %[3]s; while :; do sleep 0.1; done`,
				log, pid, grantScript(g1, ""))
			holder := startOn(t, url(via), dir, "lock", "--ttl", "6s", "--grace", "5s", path, "--", "sh", "-c", script)
			holder.awaitLog("lock acquired")
			child := readPid(t, pid)
			first := readGrant(t, g1)

			cut := time.Now()
			fp.Blackhole()
			next := startOn(t, url(addr), dir, "lock", "--ttl", "6s", path, "--", "sh", "-c", grantScript(g2, ""))
			holder.expect(exitLost, 60*time.Second)
			lost := holder.logged("ownership lost: stopping the command")
			if lost == nil {
				t.Fatalf("the holder did not say it lost ownership:\n%s", holder.stderr)
			}
			if lines := readLines(t, log); len(lines) != 1 || lines[0] != "terminated" {
				t.Errorf("the command was not stopped with SIGTERM: %q", lines)
			}
			serverkit.Eventually(t, 10*time.Second, "the command gone", func() bool { return !running(child) })

			next.expect(0, 60*time.Second)
			granted := next.logged("lock acquired")
			if second := readGrant(t, g2); second.token <= first.token {
				t.Errorf("the next holder's token %d is not larger than %d", second.token, first.token)
			}
			lostAt, grantedAt := logTime(t, lost), logTime(t, granted)
			t.Logf("after the cut: the holder gave ownership up in %v (cause %v), the next process was granted in %v",
				lostAt.Sub(cut).Round(time.Millisecond), lost["cause"], grantedAt.Sub(cut).Round(time.Millisecond))
			if !lostAt.Before(grantedAt) {
				t.Errorf("the next process was granted (%v) before the cut-off holder gave up (%v)", grantedAt, lostAt)
			}
		})
	}
}

// logTime is the time of a JSON log record.
func logTime(t *testing.T, r map[string]any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
	if err != nil {
		t.Fatalf("log record %v: %v", r, err)
	}
	return at
}

// listenProxy listens on a loopback port and forwards every connection to
// addr through p, so that a zkrecipes process can be cut off from its
// server (p.Blackhole). It returns the port's host:port; everything stops
// at the test's cleanup.
func listenProxy(t *testing.T, p *serverkit.FaultProxy, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := p.Dial("tcp", addr, 5*time.Second)
				if err != nil {
					c.Close()
					return
				}
				pipe(c, s)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		p.Close() // closes the proxy's ends, which ends every pipe
		wg.Wait()
	})
	return l.Addr().String()
}

// pipe copies between a and b both ways until either side ends, then
// closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}

// TestBackendOf: the scheme of --servers picks the backend; no scheme is
// ZooKeeper's host:port list.
func TestBackendOf(t *testing.T) {
	for in, want := range map[string]backend{
		"zk1:2181,zk2:2181/app":            zkBackend,
		"127.0.0.1":                        zkBackend,
		"etcd://e1:2379,e2:2379/app":       etcdBackend,
		" ETCD://e1:2379":                  etcdBackend,
		"postgres://cron@db/app":           pgBackend,
		"postgresql://cron@db/app?x=y":     pgBackend,
		"redis://:pw@cache:6379/2":         redisBackend,
		"rediss://cache:6380":              redisBackend,
		"zookeeper://zk1:2181":             "",
		"mysql://root:secret@db:3306/cron": "",
	} {
		got, err := backendOf(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("backendOf(%q) = %q, %v; want %q", in, got, err, want)
		}
		secrettest.AbsentErr(t, "backendOf("+redact(in)+")'s error", err, "secret")
	}
}

// TestRedact: a URL's password never reaches the log.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://cron:s3cr%40t@db:5432/app?sslmode=require": "postgres://cron:xxxxx@db:5432/app?sslmode=require",
		"redis://:pw@cache:6379/2":                             "redis://:xxxxx@cache:6379/2",
		"redis://user@cache":                                   "redis://user@cache",
		"etcd://e1:2379,e2:2379/app":                           "etcd://e1:2379,e2:2379/app",
		"zk1:2181/app":                                         "zk1:2181/app",
		"postgres://u:a@b@db/app":                              "postgres://u:xxxxx@db/app",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLockBadURLsHidePassword: `zkrecipes lock --servers URL` never shows
// the URL's password, whatever its output, for URLs each backend refuses
// (some that net/url can't parse) and one pointing at a real Redis server.
func TestLockBadURLsHidePassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := redistest.Start(t)
	for _, u := range []string{
		"redis://:S3cretRedisPW@a:1,b:2/0", "redis://:S3cretRedisPW@/0", "redis://:S3cret RedisPW@h:1",
		"redis://:S3cret/RedisPW@h:1", "redis://u:S3cretRedisPW@h:1/notadb", "rediss://:S3cretRedisPW@/0",
		"redis://nobody:S3cretRedisPW@" + srv.Addr() + "/0",
		"etcd://user:S3cretEtcdPW@127.0.0.1:1", "etcd://user:S3cret/EtcdPW@127.0.0.1:1",
		"postgres://u:S3cretPgPW@h:notaport/db", "postgres://u:S3cret PgPW@h/db",
		"mysql://u:S3cretPW@h/db",
	} {
		p := start(t, nil, dir, "lock", "--servers", u, "--connect-timeout", "10s", "/cli-test/x", "--", "true")
		if code := p.wait(30 * time.Second); code == 0 {
			t.Errorf("zkrecipes lock --servers %q exited 0", u)
		}
		if out := p.stderr.String() + p.stdout.String(); strings.Contains(out, "S3cret") || strings.Contains(out, "PW") {
			t.Errorf("zkrecipes lock --servers %q shows the password:\n%s", u, out)
		}
	}
}

// TestUnavailable: which failures say "try again later" (69).
func TestUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", recipe.ErrSessionLost), true},
		{etcdlock.ErrUnreachable, true},
		{fmt.Errorf("connect: %w", refused), true},
		{io.ErrUnexpectedEOF, true},
		{&pgconn.PgError{Code: "57P01"}, true},  // admin_shutdown
		{&pgconn.PgError{Code: "08006"}, true},  // connection_failure
		{&pgconn.PgError{Code: "28P01"}, false}, // invalid_password
		{recipe.ErrLocked, false},
		{errors.New("ERR unknown command"), false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("unavailable(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}

// TestConnectStatusRefusedReset: TLS 1.3 can meet a server's refusal of
// a missing client certificate as a reset on the first write, which the
// Redis backend describes as a refusal that is unreachable too. It exited
// 69 (try again later) one run in many; a refusal is 70, however it came.
func TestConnectStatusRefusedReset(t *testing.T) {
	reset := &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	err := fmt.Errorf("%w: %w", recipe.ErrUnreachable, fmt.Errorf("%w: no client certificate: %w", recipe.ErrNoPermission, reset))
	log := slog.New(slog.DiscardHandler)
	if got := connectStatus(log, "Redis", "redis://127.0.0.1:1/0", err); got != exitSoftware {
		t.Errorf("connectStatus(a refusal met as a reset) = %d, want %d", got, exitSoftware)
	}
	if got := connectStatus(log, "Redis", "redis://127.0.0.1:1/0", fmt.Errorf("%w: %w", recipe.ErrUnreachable, reset)); got != exitUnavailable {
		t.Errorf("connectStatus(a reset) = %d, want %d", got, exitUnavailable)
	}
}

// TestLowerScheme: a scheme in capitals is the same scheme (RFC 3986), and
// is handed to the backend's client in lower case (pgx took only that).
func TestLowerScheme(t *testing.T) {
	for in, want := range map[string]string{
		"POSTGRES://u@h/DB":     "postgres://u@h/DB",
		"Redis://H:6379":        "redis://H:6379",
		"zk1:2181,zk2:2181/App": "zk1:2181,zk2:2181/App",
		"host=db dbname=A":      "host=db dbname=A",
	} {
		if got := lowerScheme(in); got != want {
			t.Errorf("lowerScheme(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSessionTimeoutWithoutTTL: --session-timeout with etcd names the
// lease's bound: --ttl where the command has one (lock), the default TTL
// where it has none (members, watch said "--ttl", which they refuse).
func TestSessionTimeoutWithoutTTL(t *testing.T) {
	for _, withTTL := range []bool{true, false} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Duration("session-timeout", 0, "")
		if withTTL {
			fs.Duration("ttl", 0, "")
		}
		if err := fs.Parse([]string{"--session-timeout", "3s"}); err != nil {
			t.Fatal(err)
		}
		err := checkBackendFlags(fs, etcdBackend)
		want := "--ttl"
		if !withTTL {
			want = defaultTTL.String()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("with --ttl defined %t: %v, want it to name %s", withTTL, err, want)
		}
	}
}
