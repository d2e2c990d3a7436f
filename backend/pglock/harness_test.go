package pglock

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestMain runs a child process's part (childEnv) or the tests, then stops
// the shared server and checks for leaked goroutines. The tests spend their
// time waiting (leases, delays, the server's queue), not computing, each on
// a database (and roles) of its own on the shared server: they run up to 8
// at once (go test -parallel still wins), not GOMAXPROCS (2 here). Serial,
// and so first, are the tests that set environment variables (t.Setenv),
// spin a CPU (TestAcquireDeadlineAnswersWithCtx) or bound a connect to a
// server of their own (TestConnectWrongServer; TestConnectErrors, parallel
// before, stays so: it launches the TLS server, which would run alone).
func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	if err := flag.Set("test.parallel", "8"); err != nil {
		panic(err)
	}
	serverkit.MainThen(m, pgtest.StopShared)
}

// testTTL is the TTL of the tests' sessions: holders give up 2 s after the
// last answered ping, the server frees a silent holder's lock after 4 s.
const testTTL = 4 * time.Second

// TestConformance runs the backend-neutral lock suite against PostgreSQL.
// It spends most of its time waiting for leases to expire, so it runs in
// parallel with the other tests that do (each test has a database of its
// own; TestServerCrashRestart restarts a server of its own).
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, newHarness(t))
}

// TestHolderConformance: Mutex as a recipe.HolderObserver
// (locktest.RunHolder), observed from a session of its own that polls
// every 50 ms.
func TestHolderConformance(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	locktest.RunHolder(t, h, func(tb testing.TB, lock string) recipe.HolderObserver {
		p := serverkit.NewFaultProxy()
		tb.Cleanup(p.Close)
		m, err := New(h.session(tb, p, WithPollInterval(50*time.Millisecond)), lock)
		if err != nil {
			tb.Fatal(err)
		}
		return m
	})
}

// harness is the locktest.Harness of pglock: every client has its own
// session behind its own FaultProxy, on a database of the test's own.
type harness struct {
	dsn  string
	cfg  *pgconn.Config
	opts []Option // every client session's options (WithTLS on the TLS server)

	mu  sync.Mutex // serializes adm
	adm *pgconn.PgConn
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOn(t, pgtest.Shared(t).Database(t))
}

// newHarnessOn is newHarness on the database of dsn, every session with
// opts.
func newHarnessOn(t testing.TB, dsn string, opts ...Option) *harness {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hangUp(adm) }) // before Database drops the database
	return &harness{dsn: dsn, cfg: cfg, adm: adm, opts: opts}
}

// hangUp closes a connection of the tests' own (an administrator's, a
// role's), outside any Session.
func hangUp(conn *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}

// session opens a session whose connections all go through p.
func (h *harness) session(tb testing.TB, p *serverkit.FaultProxy, opts ...Option) *Session {
	tb.Helper()
	cfg := h.cfg.Copy()
	cfg.DialFunc = proxyDialer(p, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]Option{WithTTL(testTTL), WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := ConnectConfig(ctx, cfg, opts...)
	if err != nil {
		tb.Fatalf("ConnectConfig: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// proxyDialer dials addr through p whatever address it is asked for (a
// cancel request asks for the "pipe" address of the proxy's connections).
func proxyDialer(p *serverkit.FaultProxy, addr string) pgconn.DialFunc {
	return func(ctx context.Context, _, _ string) (net.Conn, error) { return p.DialContext(ctx, "tcp", addr) }
}

// NewClient implements locktest.Harness.
func (h *harness) NewClient(tb testing.TB, lock string) locktest.Client {
	tb.Helper()
	p := serverkit.NewFaultProxy()
	tb.Cleanup(p.Close) // after the session's Close (cleanups run last-in first-out)
	s := h.session(tb, p, h.opts...)
	m, err := New(s, lock)
	if err != nil {
		tb.Fatal(err)
	}
	return &client{Mutex: m, s: s, p: p}
}

// Leftovers counts the lock's entries in pg_locks (holders and waiters),
// through the harness's own connection.
func (h *harness) Leftovers(ctx context.Context, lock string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return countLocks(ctx, h.adm, Key(lock))
}

// countLocks counts the sessions holding or waiting for key in conn's
// database.
func countLocks(ctx context.Context, conn *pgconn.PgConn, key int64) (int, error) {
	rows, err := query(ctx, conn, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "+
		"database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND "+
		"classid = $1::oid AND objid = $2::oid AND objsubid = 1",
		strconv.FormatUint(uint64(key)>>32, 10), strconv.FormatUint(uint64(key)&0xffffffff, 10))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(rows[0][0]))
}

// LeaseTime: the server ends a silent holder's session testTTL after the last
// ping it received, which came at most a ping interval (testTTL/10) before
// the crash; Min is half of that, Max leaves 5 s of slack for a loaded
// machine.
func (h *harness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: testTTL / 2, Max: testTTL + 5*time.Second}
}

// client is a lock on its own session, behind its own FaultProxy.
type client struct {
	*Mutex
	s *Session
	p *serverkit.FaultProxy
}

// Crash models a holder that vanishes without the server being told: its
// host loses power, or a partition that never heals. The proxy swallows
// everything from then on, the goodbye and the socket's close included, and
// the client stops. (A killed process whose kernel closes its socket is
// different: PostgreSQL frees its locks at once, which is safe since the
// process can't act any more; TestKilledHolderProcessFreesAtOnce.)
func (c *client) Crash() {
	c.p.Blackhole()
	c.s.Close()
}

// CutOff is a network partition: the connections stay open but nothing is
// forwarded either way, not even a close.
func (c *client) CutOff() { c.p.Blackhole() }

// Heal ends the partition (the blackholed connections are closed).
func (c *client) Heal() { c.p.Resume() }
