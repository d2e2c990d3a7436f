// Package pgtrust decides whether a PostgreSQL table may be trusted with
// fencing state (pglock's token counters, fencesql's fence rows): a table
// someone else can write, or one found through a schema other than the
// intended one, lets an attacker rewind the counters, so a stale holder's
// write lands. It is driver-neutral: the caller passes a Query function
// over its own connection (pgconn in pglock, database/sql in fencesql).
//
// The rules (Check): the table is an ordinary, permanent (not unlogged or
// temporary) table; its owner and its schema's owner are trusted; no role
// other than a trusted one holds a privilege that allows writes (anything
// but SELECT, REFERENCES and MAINTAIN, on the table or any column); it has
// no triggers, rules, row security or policies; a name given without a
// schema resolves, through search_path, to current_schema() (where CREATE
// TABLE puts it), not to a table of another schema that shadows or stands
// in for it. Trusted roles are the connecting role (current_user), the
// roles the caller names, and superusers (who can do anything anyway); a
// schema owned by pg_database_owner (the public schema from PostgreSQL 15)
// is trusted when the database's owner is.
//
// The check holds after it ran as long as the trusted roles keep it so:
// only a table's owner (or its schema's owner, or a superuser) can grant
// privileges, add triggers, rules or policies, or drop and replace it.
// Callers use Table.Qualified in every later statement, never the bare
// name, so that no later search_path change redirects them.
//
// Check runs as the application before it trusts anything, so its own
// statements name only pg_catalog's objects (the rule of SQL in pgtrust,
// pglock and fencesql): every operator is written OPERATOR(pg_catalog.op)
// (also for IN and NOT IN, which call = and <>), every function
// pg_catalog.f, every type pg_catalog.t. A role with CREATE on a schema of
// search_path (public before PostgreSQL 15) can otherwise plant an operator
// that the statement resolves to instead of pg_catalog's: one whose
// argument types match exactly where pg_catalog's needs a cast (varchar =
// varchar, text || name), or a same-signature copy when search_path lists
// its schema before pg_catalog; it then runs as the application's role
// (CVE-2018-1058).
//
// Its tests, against a real PostgreSQL, are in testkit/pgtest/pgtrusttest
// (the pgx driver's module, out of the root module's graph).
package pgtrust

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// eq is PostgreSQL's equality operator, named so that no other schema's
// can stand in for it (see the package documentation).
const eq = " OPERATOR(pg_catalog.=) "

// ErrUntrusted is matched (errors.Is) by every *Error: the table exists
// but does not pass Check's rules. Packages that use pgtrust re-export it
// (pglock.ErrUntrustedTable, fencesql's own name).
var ErrUntrusted = errors.New("untrusted table")

// Error is Check's error for a table that fails the rules: Table is its
// schema-qualified name as PostgreSQL quotes it, Reason the rule it breaks
// (roles are named; no secret is ever part of it).
type Error struct {
	Table  string
	Reason string
}

// Error names the schema-qualified table and the rule it breaks.
func (e *Error) Error() string { return fmt.Sprintf("untrusted table %s: %s", e.Table, e.Reason) }

// Unwrap returns ErrUntrusted.
func (e *Error) Unwrap() error { return ErrUntrusted }

// Query runs sql with text parameters ($1, $2, ...) on the caller's
// connection and returns every row's columns as text. Check's statements
// return no NULL. A database/sql caller scans into []sql.NullString.
type Query func(ctx context.Context, sql string, args ...string) ([][]string, error)

// Table is a table resolved by Check.
type Table struct {
	Schema    string // the schema, unquoted ("public")
	Name      string // the table's name, unquoted
	Qualified string // quote_ident(Schema) || '.' || quote_ident(Name): for statements and messages
	Exists    bool   // the table exists (it passed the rules if Check returned no error)
}

// Check resolves name ("table" or "schema.table"; the first dot separates,
// and neither part is unquoted further, so pass identifiers as stored) and,
// if the table exists, checks it against the package's rules. trusted names
// roles the caller trusts besides the connecting role and superusers.
//
// Results: the Table and nil when it exists and passes; the Table with
// Exists false and nil when there is no such table (its schema, if it
// exists, has passed the owner rule: create it as Table.Qualified, then call
// Check again, since someone may have created it first); a *Error matching
// ErrUntrusted when a rule is broken; the Query's error otherwise (and
// an error, not matching ErrUntrusted, when search_path names no existing
// schema for a bare name).
func Check(ctx context.Context, q Query, name string, trusted []string) (Table, error) {
	t, err := resolve(ctx, q, name)
	if err != nil {
		return t, err
	}
	c := checker{ctx: ctx, q: q, t: t, trusted: trusted}
	return c.t, c.run()
}

// resolve finds the schema a name means and how PostgreSQL quotes it. A
// bare name means current_schema(); if search_path resolves it to another
// relation (in pg_temp, or an earlier schema where it exists when
// current_schema has none), the name is untrusted.
func resolve(ctx context.Context, q Query, name string) (Table, error) {
	schema, rel, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, rel = "", name
	}
	rows, err := q(ctx, `SELECT COALESCE(CASE WHEN $1::pg_catalog.text OPERATOR(pg_catalog.=) '' THEN pg_catalog.current_schema()::pg_catalog.text ELSE $1::pg_catalog.text END, ''),
  COALESCE((SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
    WHERE $1::pg_catalog.text OPERATOR(pg_catalog.=) '' AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(pg_catalog.quote_ident($2::pg_catalog.text))::pg_catalog.oid), '')`, schema, rel)
	if err != nil {
		return Table{}, err
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return Table{}, errors.New("pgtrust: schema lookup returned no row")
	}
	schema, found := rows[0][0], rows[0][1]
	if schema == "" {
		return Table{}, fmt.Errorf("pgtrust: no schema of search_path exists for table %q: name one (schema.table)", name)
	}
	rows, err = q(ctx, "SELECT pg_catalog.concat(pg_catalog.quote_ident($1::pg_catalog.text), '.', pg_catalog.quote_ident($3::pg_catalog.text)), "+
		"pg_catalog.concat(pg_catalog.quote_ident($2::pg_catalog.text), '.', pg_catalog.quote_ident($3::pg_catalog.text))", schema, found, rel)
	if err != nil {
		return Table{}, err
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return Table{}, errors.New("pgtrust: quote_ident returned no row")
	}
	t := Table{Schema: schema, Name: rel, Qualified: rows[0][0]}
	if found != "" && found != schema {
		return t, &Error{Table: rows[0][1], Reason: fmt.Sprintf(
			"the bare name %q resolves through search_path to it, not to %s in current_schema(): name the schema (schema.table)",
			rel, t.Qualified)}
	}
	return t, nil
}
