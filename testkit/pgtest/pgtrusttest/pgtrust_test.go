package pgtrusttest_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/pgtrust"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a database with an application role (app, an ordinary role
// with CREATE on public, as every role had before PostgreSQL 15) and an
// attacker (mallory, likewise), each with a database/sql handle.
type fixture struct {
	app, mallory, dsn string
	admin, asApp, as  *sql.DB
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := pgtest.Shared(t)
	f := &fixture{app: srv.Role(t, "app"), mallory: srv.Role(t, "mallory")}
	f.dsn = srv.Database(t)
	f.admin, f.asApp, f.as = f.open(t, "", ""), f.open(t, f.app, ""), f.open(t, f.mallory, "")
	f.exec(t, f.admin, "GRANT CREATE ON SCHEMA public TO "+f.app+", "+f.mallory)
	return f
}

// open returns a handle on the test database as role ("": the
// administrator), with searchPath if not "".
func (f *fixture) open(t *testing.T, role, searchPath string) *sql.DB {
	t.Helper()
	d := f.dsn
	if role != "" {
		var err error
		if d, err = pgtest.AsRole(d, role); err != nil {
			t.Fatal(err)
		}
	}
	if searchPath != "" {
		d += "&search_path=" + searchPath
	}
	db, err := sql.Open("pgx", d)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one session: search_path changes stick
	t.Cleanup(func() { db.Close() })
	return db
}

func (f *fixture) exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func check(db *sql.DB, name string, trusted ...string) (pgtrust.Table, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pgtrust.Check(ctx, pgtrust.DB(db), name, trusted)
}

const ddl = " (key bigint PRIMARY KEY, name text NOT NULL, n bigint NOT NULL)"

// TestOwnTable: a missing table is reported as such, in current_schema();
// the connecting role's own table, with no grants, passes.
func TestOwnTable(t *testing.T) {
	f := newFixture(t)
	tb, err := check(f.asApp, "tokens")
	if err != nil || tb.Exists || tb.Qualified != "public.tokens" {
		t.Fatalf("missing table: %+v, %v; want public.tokens, not existing", tb, err)
	}
	f.exec(t, f.asApp, "CREATE TABLE "+tb.Qualified+ddl, "GRANT SELECT, REFERENCES ON public.tokens TO PUBLIC")
	if tb, err = check(f.asApp, "tokens"); err != nil || !tb.Exists {
		t.Fatalf("own table: %+v, %v; want it to pass", tb, err)
	}
	if tb, err = check(f.asApp, `public.user`); err != nil || tb.Qualified != `public."user"` {
		t.Fatalf("a keyword as name: %+v, %v; want public.\"user\"", tb, err)
	}
}

// TestRefused: every way to plant or open up the table is refused with a
// *pgtrust.Error naming the table, schema-qualified; naming the other role
// trusted lets the ownership and grant cases pass.
func TestRefused(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name, table, want string
		setup             func()
		trust             bool // passes when mallory is trusted
	}{
		{"planted", "t1", "owned by role", func() { f.exec(t, f.as, "CREATE TABLE public.t1"+ddl, "GRANT ALL ON public.t1 TO "+f.app) }, true},
		{"granted", "t2", "UPDATE to " + f.mallory, func() { f.exec(t, f.asApp, "CREATE TABLE public.t2"+ddl, "GRANT UPDATE ON public.t2 TO "+f.mallory) }, true},
		{"public", "t3", "TRUNCATE to PUBLIC", func() { f.exec(t, f.asApp, "CREATE TABLE public.t3"+ddl, "GRANT TRUNCATE ON public.t3 TO PUBLIC") }, false},
		{"column", "t4", "UPDATE (n) to " + f.mallory, func() {
			f.exec(t, f.asApp, "CREATE TABLE public.t4"+ddl, "GRANT UPDATE (n) ON public.t4 TO "+f.mallory)
		}, true},
		{"trigger", "t5", `trigger "rewind"`, func() {
			f.exec(t, f.asApp, "CREATE TABLE public.t5"+ddl,
				"CREATE FUNCTION public.rewind() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.n := 1; RETURN NEW; END$$",
				"CREATE TRIGGER rewind BEFORE UPDATE ON public.t5 FOR EACH ROW EXECUTE FUNCTION public.rewind()")
		}, false},
		{"rule", "t6", `rule "r"`, func() {
			f.exec(t, f.asApp, "CREATE TABLE public.t6"+ddl, "CREATE RULE r AS ON UPDATE TO public.t6 DO INSTEAD NOTHING")
		}, false},
		{"policy", "t7", "row level security", func() {
			f.exec(t, f.asApp, "CREATE TABLE public.t7"+ddl, "ALTER TABLE public.t7 ENABLE ROW LEVEL SECURITY")
		}, false},
		{"unlogged", "t8", "not a permanent table", func() { f.exec(t, f.asApp, "CREATE UNLOGGED TABLE public.t8"+ddl) }, false},
		{"view", "t9", "not an ordinary table", func() { f.exec(t, f.asApp, "CREATE VIEW public.t9 AS SELECT 1::bigint AS key") }, false},
		{"search_path", "t10", "resolves through search_path", func() {
			// app's own schema comes first on its search_path but lacks
			// the table: the bare name finds mallory's in public.
			f.exec(t, f.admin, "CREATE SCHEMA "+f.app+" AUTHORIZATION "+f.app)
			f.exec(t, f.as, "CREATE TABLE public.t10"+ddl)
		}, false},
		{"schema owner", "evil.t11", `schema "evil" is owned by role`, func() {
			f.exec(t, f.admin, "CREATE SCHEMA evil AUTHORIZATION "+f.mallory, "GRANT CREATE, USAGE ON SCHEMA evil TO "+f.app)
			f.exec(t, f.asApp, "CREATE TABLE evil.t11"+ddl)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.setup()
			_, err := check(f.asApp, c.table)
			var pe *pgtrust.Error
			if !errors.Is(err, pgtrust.ErrUntrusted) || !errors.As(err, &pe) ||
				!strings.Contains(pe.Table, ".") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check(%s): %v; want a *pgtrust.Error naming the table, with %q", c.table, err, c.want)
			}
			if _, err := check(f.asApp, c.table, f.mallory); c.trust != (err == nil) {
				t.Errorf("Check(%s) trusting %s: %v", c.table, f.mallory, err)
			}
		})
	}
}
