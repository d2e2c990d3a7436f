package fencesql_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// The trial's reproduction (CVE-2018-1058 class), as mallory, who may
// create in public: an exact varchar = varchar operator, which PostgreSQL
// prefers to pg_catalog's text = text for a VARCHAR column, rewinding every
// fence row as whoever calls it. zkr_repro counts its calls (a sequence:
// not undone by a rollback).
const reproSQL = `
CREATE SEQUENCE public.zkr_repro;
GRANT USAGE ON SEQUENCE public.zkr_repro TO PUBLIC;
CREATE FUNCTION public.zkr_eq(a varchar, b varchar) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_catalog.nextval('public.zkr_repro'); UPDATE public.zkrecipes_fence SET token = 1; RETURN a::text = b::text; END $$;
CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.zkr_eq);`

// oldDDL is the fence table as earlier versions created it.
const oldDDL = "CREATE TABLE public.zkrecipes_fence (resource VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL CHECK (token > 0))"

// TestPlantedOperator is the trial's reproduction: the application's
// statements (Highest, Do, CreateTable, Update on a varchar key, with the
// default search_path) must not call mallory's operator, so token 10 stays
// the fence and 5 is refused, for a table of earlier versions (VARCHAR) and
// for one CreateTable makes.
func TestPlantedOperator(t *testing.T) {
	for _, existing := range []bool{true, false} {
		name := map[bool]string{true: "table of earlier versions", false: "table made by CreateTable"}[existing]
		t.Run(name, func(t *testing.T) {
			r := newPgRoles(t)
			mustExec(t, r.admin, "GRANT CREATE ON SCHEMA public TO PUBLIC")
			app, mallory := r.asDefault(t, r.app), r.asDefault(t, r.mallory)
			mustExec(t, app, "CREATE TABLE public.accounts (id varchar(20) PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)",
				"INSERT INTO public.accounts VALUES ('a', 0, 0)")
			if existing {
				mustExec(t, app, oldDDL)
			}
			mustExec(t, mallory, reproSQL)
			ctx := ctxT(t)
			if err := fencesql.CreateTable(ctx, app); err != nil {
				t.Fatal(err)
			}
			f := newFence(t, app)
			if err := f.Do(ctx, "r", 10, nil); err != nil {
				t.Fatal(err)
			}
			f2, err := fencesql.New(app)
			if err != nil {
				t.Fatal(err)
			}
			if high, err := f2.Highest(ctx, "r"); err != nil || high != 10 {
				t.Errorf("Highest: %v, %v; want 10", high, err)
			}
			ran := false
			err = f2.Do(ctx, "r", 5, func(*sql.Tx) error { ran = true; return nil })
			if !errors.Is(err, fence.ErrStale) || ran {
				t.Errorf("Do(5) after 10: %v (fn ran: %v); want fence.ErrStale, fn not called", err, ran)
			}
			row := fencesql.Row{Table: "public.accounts", Key: "id", ID: "a"}
			if err := f2.Update(ctx, app, 10, row, "balance = $1", 100); err != nil {
				t.Fatal(err)
			}
			if err := f2.Update(ctx, app, 5, row, "balance = $1", 50); !errors.Is(err, fence.ErrStale) {
				t.Errorf("Update(5) after 10: %v; want fence.ErrStale", err)
			}
			var calls, token, balance int64
			q := "SELECT (SELECT pg_catalog.max(token) FROM public.zkrecipes_fence), (SELECT balance FROM public.accounts), " +
				"(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.zkr_repro)"
			if err := r.admin.QueryRowContext(ctx, q).Scan(&token, &balance, &calls); err != nil {
				t.Fatal(err)
			}
			if calls != 0 || token != 10 || balance != 100 {
				t.Fatalf("mallory's operator ran %d times; token %d (want 10), balance %d (want 100)", calls, token, balance)
			}
		})
	}
}

// TestHijackedStatements: with every overload pgtest.PlantHijack plants in
// public (exact matches beating pg_catalog's coerced operators and
// functions, same-signature copies, domains named like pg_catalog's
// types), no statement of CreateTable, Do (accepted and stale), Highest or
// Update (written, stale, no row; varchar, text and bigint keys) runs an
// attacker's object, with the default search_path or one listing public
// before pg_catalog, for a new fence table and one of earlier versions.
func TestHijackedStatements(t *testing.T) {
	r := newPgRoles(t)
	mustExec(t, r.admin, "GRANT CREATE ON SCHEMA public TO PUBLIC")
	dsn, err := pgtest.AsRole(r.dsn, r.mallory)
	if err != nil {
		t.Fatal(err)
	}
	app := r.asDefault(t, r.app)
	mustExec(t, app, "CREATE TABLE public.old_fence (resource VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL CHECK (token > 0))")
	for _, k := range []string{"varchar(20)", "text", "bigint"} {
		name := "acc_" + k[:4]
		mustExec(t, app, "CREATE TABLE public."+name+" (id "+k+" PRIMARY KEY, balance bigint NOT NULL, fence bigint)",
			"INSERT INTO public."+name+" VALUES ('1', 0, NULL)")
	}
	h := pgtest.PlantHijack(t, dsn)
	for i, path := range []string{"", "public,pg_catalog"} {
		db := app
		if path != "" {
			db = r.as(t, r.app, path)
		}
		ctx := ctxT(t)
		for _, table := range []string{fmt.Sprintf("fence%d", i), "public.old_fence"} {
			f, err := fencesql.New(db, fencesql.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.CreateTable(ctx); err != nil {
				t.Fatalf("%s: CreateTable: %v", table, err)
			}
			res := fmt.Sprintf("r%d", i)
			if err := f.Do(ctx, res, 10, nil); err != nil {
				t.Fatalf("%s: Do: %v", table, err)
			}
			if err := f.Do(ctx, res, 5, nil); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("%s: Do(5) after 10: %v", table, err)
			}
			if high, err := f.Highest(ctx, res); err != nil || high != 10 {
				t.Fatalf("%s: Highest: %v, %v", table, high, err)
			}
			if high, err := f.Highest(ctx, "nosuch"); err != nil || high != 0 {
				t.Fatalf("%s: Highest of a new resource: %v, %v", table, high, err)
			}
		}
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"acc_varc", "acc_text", "acc_bigi"} {
			row := fencesql.Row{Table: "public." + name, Key: "id", ID: "1"}
			if name == "acc_bigi" {
				row.ID = 1
			}
			tok := fence.Token(10 * (i + 1))
			if err := f.Update(ctx, db, tok, row, "balance = $1", 100); err != nil {
				t.Fatalf("Update %v: %v", row, err)
			}
			if err := f.Update(ctx, db, tok-5, row, "balance = $1", 50); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("Update %v with an older token: %v", row, err)
			}
			row.ID = "2"
			if name == "acc_bigi" {
				row.ID = 2
			}
			if err := f.Update(ctx, db, tok, row, "balance = $1", 100); !errors.Is(err, fencesql.ErrNoRow) {
				t.Fatalf("Update %v: %v; want ErrNoRow", row, err)
			}
		}
		if n, what := h.Hits(t); n != 0 {
			t.Fatalf("search_path %q: the attacker's objects ran %d times: %q", path, n, what)
		}
	}
}
