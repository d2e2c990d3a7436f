package fencesql_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// pgRoles is a database with two ordinary roles: app, the application,
// and mallory, who may create tables where app does (every role could in
// public before PostgreSQL 15). Each variant works in a schema of its own.
type pgRoles struct {
	dsn, app, mallory string
	admin             *sql.DB
}

func newPgRoles(t *testing.T) *pgRoles {
	t.Helper()
	srv := pgtest.Shared(t)
	r := &pgRoles{app: srv.Role(t, "app"), mallory: srv.Role(t, "mallory")} // before the database: dropped after it
	r.dsn = srv.Database(t)
	r.admin = openPostgresDSN(t, r.dsn)
	return r
}

// as opens a handle for role with search_path.
func (r *pgRoles) as(t *testing.T, role, searchPath string) *sql.DB {
	t.Helper()
	dsn, err := pgtest.AsRole(r.dsn, role)
	if err != nil {
		t.Fatal(err)
	}
	return openPostgresDSN(t, dsn+"&search_path="+searchPath) // no spaces: pgx keeps a + as it is
}

// asDefault opens a handle for role with the server's default search_path
// ("$user", public).
func (r *pgRoles) asDefault(t *testing.T, role string) *sql.DB {
	t.Helper()
	dsn, err := pgtest.AsRole(r.dsn, role)
	if err != nil {
		t.Fatal(err)
	}
	return openPostgresDSN(t, dsn)
}

// schema creates a schema owned by the superuser in which app and mallory
// may both create tables, as in public before PostgreSQL 15.
func (r *pgRoles) schema(t *testing.T, name string) {
	t.Helper()
	mustExec(t, r.admin, "CREATE SCHEMA "+name, "GRANT USAGE, CREATE ON SCHEMA "+name+" TO "+r.app+", "+r.mallory)
}

// plant is one way the fence table can be left to someone else's writes.
type plant struct {
	name   string
	path   string                                   // app's search_path
	setup  func(t *testing.T, r *pgRoles, s string) // s: the variant's schema
	lower  string                                   // mallory's statement lowering the tokens ("" if the setup does)
	create bool                                     // app calls CreateTable (else it assumes the table exists)
}

// plants are the variants of finding 1 for fencesql.
func plants() []plant {
	ownTable := func(t *testing.T, r *pgRoles, s string, then ...string) {
		app := r.as(t, r.app, s)
		f, err := fencesql.New(app)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, app, append([]string{f.DDL()}, then...)...)
	}
	return []plant{
		{"planted by another role", "", func(t *testing.T, r *pgRoles, s string) {
			mustExec(t, r.as(t, r.mallory, s), "CREATE TABLE zkrecipes_fence (resource VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL)",
				"GRANT ALL ON zkrecipes_fence TO "+r.app)
		}, "UPDATE %s.zkrecipes_fence SET token = 1", true},
		{"UPDATE granted to another role", "", func(t *testing.T, r *pgRoles, s string) {
			ownTable(t, r, s, "GRANT SELECT, UPDATE ON zkrecipes_fence TO "+r.mallory)
		}, "UPDATE %s.zkrecipes_fence SET token = 1", true},
		{"INSERT, UPDATE granted to PUBLIC", "", func(t *testing.T, r *pgRoles, s string) {
			ownTable(t, r, s, "GRANT SELECT, INSERT, UPDATE ON zkrecipes_fence TO PUBLIC")
		}, "UPDATE %s.zkrecipes_fence SET token = 1", true},
		{"UPDATE of a column granted", "", func(t *testing.T, r *pgRoles, s string) {
			ownTable(t, r, s, "GRANT SELECT (resource, token), UPDATE (token) ON zkrecipes_fence TO "+r.mallory)
		}, "UPDATE %s.zkrecipes_fence SET token = 1", true},
		{"trigger", "", func(t *testing.T, r *pgRoles, s string) {
			ownTable(t, r, s)
			mustExec(t, r.admin, "CREATE FUNCTION "+s+".lower_token() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.token := 1; RETURN NEW; END$$",
				"CREATE TRIGGER lower_token BEFORE INSERT OR UPDATE ON "+s+".zkrecipes_fence FOR EACH ROW EXECUTE FUNCTION "+s+".lower_token()")
		}, "", true},
		{"found through another schema", "%[1]s_app,%[1]s", func(t *testing.T, r *pgRoles, s string) {
			mustExec(t, r.admin, "CREATE SCHEMA "+s+"_app AUTHORIZATION "+r.app, "ALTER SCHEMA "+s+" OWNER TO "+r.mallory)
			mustExec(t, r.as(t, r.mallory, s), "CREATE TABLE zkrecipes_fence (resource VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL)",
				"GRANT ALL ON zkrecipes_fence TO "+r.app)
		}, "UPDATE %s.zkrecipes_fence SET token = 1", false},
	}
}

// TestUntrustedFenceTablePostgres is finding 1 for fencesql: a fence table
// that another role created, can write, or can redirect app to was
// silently adopted by CreateTable and Do, and app accepted token 5 after
// 10 once the tokens were lowered. Each variant is refused now, naming the
// table, before any token is written or fn runs.
func TestUntrustedFenceTablePostgres(t *testing.T) {
	r := newPgRoles(t)
	for i, p := range plants() {
		t.Run(p.name, func(t *testing.T) {
			ctx := ctxT(t)
			s := "v" + string(rune('a'+i))
			r.schema(t, s)
			path := s
			if p.path != "" {
				path = strings.ReplaceAll(p.path, "%[1]s", s)
			}
			p.setup(t, r, s)
			app := r.as(t, r.app, path)
			f, err := fencesql.New(app)
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			if p.create {
				errs = append(errs, f.CreateTable(ctx))
			}
			errs = append(errs, f.Do(ctx, "r", 10, nil))
			if p.lower != "" {
				mallory := r.as(t, r.mallory, s)
				mallory.ExecContext(ctx, strings.ReplaceAll(p.lower, "%s", s)) // may have nothing to lower
			}
			ran := false
			errs = append(errs, f.Do(ctx, "r", 5, func(*sql.Tx) error { ran = true; return nil }))
			if ran {
				t.Errorf("fn ran with token 5 after token 10: the fence table accepted a lower token")
			}
			for _, err := range errs {
				if !errors.Is(err, fencesql.ErrUntrustedTable) || !strings.Contains(err.Error(), "zkrecipes_fence") {
					t.Errorf("want ErrUntrustedTable naming the table, got %v", err)
				}
			}
			t.Log(errs[len(errs)-1])
		})
	}
}

// TestTrustedFenceTablePostgres: what is refused by default is accepted
// when the caller says so: a table owned by a role named in
// WithTrustedRoles, and a schema-qualified name where the bare one
// resolves elsewhere.
func TestTrustedFenceTablePostgres(t *testing.T) {
	r := newPgRoles(t)
	ctx := ctxT(t)
	r.schema(t, "tr")
	mustExec(t, r.as(t, r.mallory, "tr"), "CREATE TABLE zkrecipes_fence (resource VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL)",
		"GRANT ALL ON zkrecipes_fence TO "+r.app)
	app := r.as(t, r.app, "tr")
	f, err := fencesql.New(app, fencesql.WithTrustedRoles(r.mallory))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatalf("a table owned by a trusted role: %v", err)
	}
	if err := f.Do(ctx, "r", 10, nil); err != nil {
		t.Fatal(err)
	}

	// The bare name resolves to tr's table; app's own schema is first.
	mustExec(t, r.admin, "CREATE SCHEMA mine AUTHORIZATION "+r.app)
	app = r.as(t, r.app, "mine,tr")
	f, err = fencesql.New(app, fencesql.WithTable("mine.zkrecipes_fence"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Do(ctx, "r", 3, nil); err != nil {
		t.Fatal(err)
	}
	if h, err := f.Highest(ctx, "r"); err != nil || h != 3 {
		t.Fatalf("Highest on mine.zkrecipes_fence: %v, %v", h, err)
	}
	if count(t, r.admin, "SELECT * FROM mine.zkrecipes_fence WHERE token = 3") != 1 {
		t.Fatal("WithTable(mine.zkrecipes_fence) wrote elsewhere")
	}
}
