package pgtrusttest_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/pgtrust"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// TestHijackedOperators: Check runs as the application before it trusts
// anything, so its own statements must resolve only pg_catalog's operators,
// functions and types, also when an attacker with CREATE on public planted
// exact-match overloads (varchar where pg_catalog takes text) and
// same-signature copies, and the application's search_path lists public
// before pg_catalog.
func TestHijackedOperators(t *testing.T) {
	f := newFixture(t)
	malloryDSN, err := pgtest.AsRole(f.dsn, f.mallory)
	if err != nil {
		t.Fatal(err)
	}
	h := pgtest.PlantHijack(t, malloryDSN)
	if n := h.Count(t); n < 50 {
		t.Fatalf("only %d objects planted", n)
	}
	f.exec(t, f.asApp, "CREATE TABLE public.tokens"+ddl, "CREATE TABLE public.wide (key bigint PRIMARY KEY, v varchar(10))",
		"GRANT SELECT (v), REFERENCES (v), UPDATE (v) ON public.wide TO "+f.mallory)
	for _, path := range []string{"", "public,pg_catalog"} {
		var db *sql.DB = f.asApp
		if path != "" {
			db = f.open(t, f.app, path)
		}
		for _, name := range []string{"tokens", "public.tokens", "nosuch", "public.nosuch"} {
			if _, err := check(db, name); err != nil {
				t.Errorf("search_path %q: Check(%s): %v", path, name, err)
			}
		}
		// Refused for its column grant: the query that finds it runs too.
		if _, err := check(db, "wide"); !errors.Is(err, pgtrust.ErrUntrusted) || !strings.Contains(err.Error(), "UPDATE (v) to "+f.mallory) {
			t.Errorf("search_path %q: Check(wide): %v; want it refused for UPDATE (v)", path, err)
		}
		if n, what := h.Hits(t); n != 0 {
			t.Fatalf("search_path %q: the attacker's objects ran %d times: %q", path, n, what)
		}
	}
}
