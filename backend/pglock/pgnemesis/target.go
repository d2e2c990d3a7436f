// Package pgnemesis is PostgreSQL under the nemesis (testkit/nemesis): a
// nemesis.Target whose clients are pglock sessions, each behind its own
// serverkit.FaultProxy, on a server of pgtest's own that the target may
// restart, crash, freeze and whose sessions it may terminate.
//
// Its fault kinds (Faults): terminate-backend (pg_terminate_backend of
// every connection of one client: its holder's and its waiter's),
// restart-fast and restart-immediate (the server down for a while after a
// fast shutdown, or after an immediate one: crash recovery), pause-server
// (SIGSTOP of the postmaster and every backend, past the holder's TTL/2).
// The engine adds the generic client faults (cut, blackhole, latency,
// pause). Its register (Registers) is a fencesql row in the same database.
package pgnemesis

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// DefaultTTL is the pglock TTL of the target's clients when Config.TTL is
// zero: short, so that a run sees many leases end.
const DefaultTTL = 2 * time.Second

// Config configures a Target.
type Config struct {
	// TTL is every client session's pglock.WithTTL (default DefaultTTL):
	// the server's bound T (idle_session_timeout), the run's SessionTimeout.
	TTL time.Duration
}

// appPrefix starts the application_name of every client connection:
// client i's is appPrefix+i, by which its sessions are found
// (terminate-backend, Leftovers). The target's own connections are named
// adminApp, and no fault is aimed at them.
const (
	appPrefix = "pgnemesis-c"
	adminApp  = "pgnemesis-admin"
)

// Target is PostgreSQL under the nemesis (a nemesis.Target). It serves one
// run at a time.
type Target struct {
	srv   *pgtest.Server
	dsn   string // the run database's, straight to the server
	ttl   time.Duration
	db    *sql.DB // the target's own connections: checks and the register
	fence *fencesql.Fence
	reg   register

	mu   sync.Mutex
	base string
	key  int64 // pglock.Key(base+"/lock")
	down bool  // a restart failed: the server is down until Heal
}

var _ nemesis.Target = (*Target)(nil)

// New returns the target on srv, a server started by pgtest (Launch or
// Start: its faults need the process; not the shared one, which other
// tests use, nor PG_TEST_DSN's). It creates a database of its own there,
// which Close drops. ctx bounds the setup.
func New(ctx context.Context, srv *pgtest.Server, cfg Config) (*Target, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < pglock.MinTTL || srv == nil || srv.Port() == 0 {
		return nil, fmt.Errorf("%w: pgnemesis: a server started by pgtest and a TTL of at least %v", nemesis.ErrBadConfig, pglock.MinTTL)
	}
	dsn, err := srv.NewDatabase(ctx, "nemesis")
	if err != nil {
		return nil, err
	}
	t := &Target{srv: srv, dsn: dsn, ttl: cfg.TTL}
	// The register's writes must be durable when they commit, as the
	// token bumps are: the test server runs with synchronous_commit off,
	// and an immediate restart would lose an accepted write.
	db, err := sql.Open("pgx", withParams(dsn, "application_name", adminApp, "synchronous_commit", "on"))
	if err == nil {
		t.db = db
		t.fence, err = fencesql.New(db, fencesql.WithDialect(fencesql.Postgres))
	}
	if err == nil {
		err = t.reg.create(ctx, db, t.fence)
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("pgnemesis: %w", err)
	}
	return t, nil
}

// withParams returns dsn (a postgres:// URL) with the query parameters kv
// (name, value, ...) set.
func withParams(dsn string, kv ...string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Name implements nemesis.Target.
func (t *Target) Name() string { return "pg" }

// SessionTimeout implements nemesis.Target: the TTL, pglock's server bound
// (idle_session_timeout: the server frees a silent holder's lock TTL after
// the last message it received; the holder gives up TTL/2 after the send
// of its last answered ping).
func (t *Target) SessionTimeout() time.Duration { return t.ttl }

// Prepare implements nemesis.Target: it ends whatever client session a
// previous run left, and resets the register. The token table's rows stay:
// tokens must keep growing across runs (a deleted row would restart them at
// 1), and the register is reset instead.
func (t *Target) Prepare(ctx context.Context, base string) error {
	t.mu.Lock()
	t.base, t.key = base, pglock.Key(base+"/lock")
	t.mu.Unlock()
	if _, err := t.db.ExecContext(ctx, "SELECT pg_catalog.pg_terminate_backend(pid, 5000) FROM pg_catalog.pg_stat_activity "+
		"WHERE application_name LIKE $1", appPrefix+"%"); err != nil {
		return fmt.Errorf("pgnemesis: ending an earlier run's sessions: %w", err)
	}
	return t.reg.reset(ctx, base+"/register")
}

func appName(i int) string { return appPrefix + strconv.Itoa(i) }

// Connect implements nemesis.Target: client i is a pglock session whose
// every connection (its check at connect, each acquisition's, the cancel
// requests) reaches the server through p's listener.
func (t *Target) Connect(ctx context.Context, i int, p *serverkit.FaultProxy) (nemesis.Client, error) {
	addr, err := p.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(t.srv.Port())))
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(t.dsn)
	if err != nil {
		return nil, err
	}
	u.Host = addr
	dsn := withParams(u.String(), "application_name", appName(i), "connect_timeout", "5")
	s, err := pglock.Connect(ctx, dsn, pglock.WithTTL(t.ttl), pglock.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	return client{s}, nil
}

// client is one pglock session.
type client struct{ s *pglock.Session }

func (c client) Lock(name string) (recipe.Lock, error) { return pglock.New(c.s, name) }
func (c client) Close() error                          { return c.s.Close() }

// Registers implements nemesis.Target: the fencesql row.
func (t *Target) Registers() []nemesis.Register {
	return []nemesis.Register{{Name: RegRow, Write: t.reg.write}}
}

// Heal implements nemesis.Target: a paused server continues, a server
// whose restart failed starts again, and Heal returns once it answers.
func (t *Target) Heal(ctx context.Context) error {
	t.srv.Resume()
	t.mu.Lock()
	down := t.down
	t.down = false
	t.mu.Unlock()
	var errs []error
	if down {
		errs = append(errs, t.srv.RestartAfter(ctx, false, 0))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := t.db.PingContext(ctx)
		if err == nil {
			return errors.Join(errs...)
		}
		if ctx.Err() != nil {
			return errors.Join(append(errs, fmt.Errorf("pgnemesis: the server does not answer after the heal: %w", err))...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// IgnoreLeaks implements nemesis.LeakFilter: a restarted server's reaper
// goroutine (pgtest waits for the postgres process it started), which
// lives as long as the server.
func (t *Target) IgnoreLeaks() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/testkit/pgtest.(*Server).run.func1")}
}

// Close implements nemesis.Target: it drops the target's database (ending
// its sessions). The server stays.
func (t *Target) Close() error {
	if t.db != nil {
		t.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return t.srv.DropDatabase(ctx, t.dsn)
}
