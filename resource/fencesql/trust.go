package fencesql

import (
	"context"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/pgtrust"
)

// A fence table someone else can write lets them lower its tokens, and a
// stale holder's write then lands: a role with CREATE on PostgreSQL's
// public schema (every role's before PostgreSQL 15) could create
// zkrecipes_fence before the application did, and CREATE TABLE IF NOT
// EXISTS adopted it. So the fence table is checked before its first use
// (CreateTable, Do, Highest) and then named with its schema in every
// statement, so that no later search_path change redirects them. The
// check holds while the trusted roles keep it so: only a table's owner,
// its schema's owner or a superuser can grant writes, add triggers, or
// drop and replace it. A Fence checks once: after dropping the fence
// table, make new Fences.

// ErrUntrustedTable is matched (errors.Is) by the error for a fence table
// that is not safe to keep tokens in: on PostgreSQL one that a role other
// than the connecting one, a superuser or one named by WithTrustedRoles
// owns or could write, or that stands in for the intended one; on SQLite a
// view, a table with triggers or a shadowing one, or a database file others
// can write. The message names the table and the rule (see The fence table
// in the package documentation for every rule). It is the same value as
// pglock.ErrUntrustedTable.
var ErrUntrustedTable = pgtrust.ErrUntrusted

// WithTrustedRoles names PostgreSQL roles, besides the connecting role and
// superusers, that may own the fence table or its schema, or hold write
// privileges on it: a migration role that created it, say. Names are as
// stored (case-sensitive); PUBLIC is never trusted.
func WithTrustedRoles(roles ...string) Option {
	return func(c *config) { c.trusted = append(c.trusted, roles...) }
}

// table is the fence table as checked, and its statements.
type table struct {
	name    string // quoted, schema-qualified
	exists  bool
	advance string
	highest string
}

// fenceTable returns the fence table, checking it on q (a connection or a
// transaction: the role and search_path are the session's) until a check
// finds it exists and is trusted; from then on that answer is kept. A
// missing table is returned with exists false: its statements then fail
// with the database's "no such table", which Do turns into a SchemaError.
func (f *Fence) fenceTable(ctx context.Context, q pgtrust.Queryer) (*table, error) {
	if t := f.checked.Load(); t != nil {
		return t, nil
	}
	var name string
	var exists bool
	var err error
	if f.d == Postgres {
		name, exists, err = f.trustPostgres(ctx, q)
	} else {
		name, exists, err = f.trustSQLite(ctx, q)
	}
	if err != nil {
		return nil, fmt.Errorf("fencesql: fence table %s: %w", f.table, err)
	}
	t := &table{name: name, exists: exists, advance: f.d.advance(name), highest: f.d.highest(name)}
	if exists {
		f.checked.Store(t)
	}
	return t, nil
}

// trustPostgres runs internal/pgtrust's check (the name folded to lower
// case, as quote does).
func (f *Fence) trustPostgres(ctx context.Context, q pgtrust.Queryer) (string, bool, error) {
	t, err := pgtrust.Check(ctx, pgtrust.DB(q), strings.ToLower(f.table), f.trusted)
	if err != nil {
		return "", false, err
	}
	return t.Qualified, t.Exists, nil
}

// queryStrings runs query on q and returns its rows as strings.
func queryStrings(ctx context.Context, q pgtrust.Queryer, query string, args ...string) ([][]string, error) {
	return pgtrust.DB(q)(ctx, query, args...)
}
