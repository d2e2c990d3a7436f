package pglock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// trustFixture is a database with two ordinary roles that may create
// tables in public (as every role could before PostgreSQL 15): app runs
// pglock, mallory attacks it.
type trustFixture struct {
	app, mallory string
	dsn          string // the test database, as the administrator
	adm          *pgconn.PgConn
}

func newTrustFixture(t *testing.T) *trustFixture {
	t.Helper()
	srv := pgtest.Shared(t)
	f := &trustFixture{app: srv.Role(t, "app"), mallory: srv.Role(t, "mallory")}
	f.dsn = srv.Database(t)
	f.adm = f.conn(t, "")
	f.exec(t, f.adm, "GRANT CREATE ON SCHEMA public TO "+f.app+", "+f.mallory)
	return f
}

// conn opens a connection to the test database as role ("": administrator).
func (f *trustFixture) conn(t *testing.T, role string) *pgconn.PgConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c, err := pgconn.ConnectConfig(ctx, f.cfg(t, role))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hangUp(c) })
	return c
}

func (f *trustFixture) cfg(t *testing.T, role string) *pgconn.Config {
	t.Helper()
	dsn := f.dsn
	if role != "" {
		var err error
		if dsn, err = pgtest.AsRole(f.dsn, role); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (f *trustFixture) exec(t *testing.T, c *pgconn.PgConn, sql string) {
	t.Helper()
	if err := c.Exec(context.Background(), sql).Close(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// connect opens a pglock Session as app.
func (f *trustFixture) connect(t *testing.T, opts ...Option) (*Session, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	opts = append([]Option{WithTTL(testTTL), WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := ConnectConfig(ctx, f.cfg(t, f.app), opts...)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// tokens takes and releases the lock n times and returns the tokens, with
// rewind (run between the grants, if not nil) as the attacker's move.
func tokens(t *testing.T, s *Session, n int, rewind func()) []fence.Token {
	t.Helper()
	m, err := New(s, "victim")
	if err != nil {
		t.Fatal(err)
	}
	var out []fence.Token
	for i := 0; i < n; i++ {
		l := mustAcquire(t, m)
		out = append(out, l.Token())
		mustRelease(t, l)
		if rewind != nil && i == n/2 {
			rewind()
		}
	}
	return out
}

// TestPlantedTokenTable is issue 23's finding 1 for pglock: mallory, with
// only CREATE on public, plants the token table (writable by app, so that
// pglock can use it) and rewinds it between grants. Connect must refuse it
// with ErrUntrustedTable naming public.zkrecipes_lock_tokens, so no token
// is handed out twice; each variant (a write grant on app's own table, a
// table found through another schema than current_schema(), a trigger) is
// refused the same way.
func TestPlantedTokenTable(t *testing.T) {
	t.Parallel()
	f := newTrustFixture(t)
	const tbl = "public." + DefaultTable
	const ddl = " (key bigint PRIMARY KEY, name text NOT NULL, n bigint NOT NULL CHECK (n > 0))"
	evil := f.conn(t, f.mallory)
	asApp := f.conn(t, f.app)
	cases := []struct {
		name, want string
		setup      func()
	}{
		{"planted", `owned by role "` + f.mallory, func() {
			f.exec(t, evil, "CREATE TABLE "+tbl+ddl+"; GRANT ALL ON "+tbl+" TO PUBLIC")
		}},
		{"granted", "UPDATE to " + f.mallory, func() {
			f.exec(t, asApp, "CREATE TABLE "+tbl+ddl+"; GRANT SELECT, UPDATE ON "+tbl+" TO "+f.mallory)
		}},
		{"search_path", "resolves through search_path", func() {
			// app's own schema comes first on search_path ("$user",
			// public) and has no table: the bare name finds public's.
			f.exec(t, f.adm, "CREATE SCHEMA "+f.app+" AUTHORIZATION "+f.app)
			f.exec(t, asApp, "CREATE TABLE "+tbl+ddl)
		}},
		{"trigger", `trigger "rewind"`, func() {
			f.exec(t, asApp, "CREATE TABLE "+tbl+ddl)
			f.exec(t, f.adm, "CREATE FUNCTION public.rewind() RETURNS trigger LANGUAGE plpgsql AS "+
				"$$BEGIN NEW.n := least(NEW.n, 2); RETURN NEW; END$$; "+
				"CREATE TRIGGER rewind BEFORE UPDATE ON "+tbl+" FOR EACH ROW EXECUTE FUNCTION public.rewind()")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer f.exec(t, f.adm, "DROP TABLE IF EXISTS "+tbl+"; DROP SCHEMA IF EXISTS "+f.app+" CASCADE; "+
				"DROP FUNCTION IF EXISTS public.rewind()")
			c.setup()
			s, err := f.connect(t)
			if err == nil {
				got := tokens(t, s, 4, func() { f.exec(t, f.adm, "UPDATE "+tbl+" SET n = 1") })
				t.Fatalf("Connect used the table; tokens handed out: %v", got)
			}
			if !errors.Is(err, ErrUntrustedTable) || !strings.Contains(err.Error(), "public.zkrecipes_lock_tokens") ||
				!strings.Contains(err.Error(), c.want) {
				t.Fatalf("Connect: %v; want ErrUntrustedTable naming %s, with %q", err, tbl, c.want)
			}
		})
	}
}

// TestTrustedRoles: an administrator's table (owned by a superuser), with
// writes granted to app and to a second locking role, passes once that
// role is named by WithTrustedRoles, and tokens keep growing; app's own
// table in its own schema, named schema-qualified, passes as is.
func TestTrustedRoles(t *testing.T) {
	t.Parallel()
	other := pgtest.Shared(t).Role(t, "other") // before the database: dropped after it
	f := newTrustFixture(t)
	tbl := "public." + DefaultTable
	f.exec(t, f.adm, "CREATE TABLE "+tbl+" (key bigint PRIMARY KEY, name text NOT NULL, n bigint NOT NULL); "+
		"GRANT SELECT, INSERT, UPDATE ON "+tbl+" TO "+f.app+", "+other)
	if _, err := f.connect(t); !errors.Is(err, ErrUntrustedTable) || !strings.Contains(err.Error(), other) {
		t.Fatalf("Connect with a write grant to an untrusted role: %v; want ErrUntrustedTable naming %s", err, other)
	}
	s, err := f.connect(t, WithTrustedRoles(other))
	if err != nil {
		t.Fatalf("Connect trusting %s: %v", other, err)
	}
	if got := tokens(t, s, 3, nil); got[0] >= got[1] || got[1] >= got[2] {
		t.Errorf("tokens %v, want increasing", got)
	}

	f.exec(t, f.adm, "CREATE SCHEMA locks AUTHORIZATION "+f.app)
	s, err = f.connect(t, WithTable("locks.tokens"))
	if err != nil {
		t.Fatalf("Connect with app's own schema: %v", err)
	}
	if s.table != "locks.tokens" {
		t.Errorf("table %q, want locks.tokens", s.table)
	}
}
