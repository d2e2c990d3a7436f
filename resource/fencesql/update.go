package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/fence"
)

// DefaultFenceColumn is the fence column's name when Row.Fence is empty.
const DefaultFenceColumn = "fence"

// Row names one row of the caller's table that carries its own fence
// column: a BIGINT (SQLite: INTEGER) holding the highest token written to
// the row, best declared NOT NULL DEFAULT 0 (NULL counts as 0).
type Row struct {
	Table string // the table, optionally schema-qualified
	Key   string // a column that identifies one row: a primary or unique key
	ID    any    // the key's value
	Fence string // the fence column (default DefaultFenceColumn)
}

// String names the row for messages and for fence.StaleError's Resource:
// "table(key=id)", the ID formatted with %v.
func (r Row) String() string { return fmt.Sprintf("%s(%s=%v)", r.Table, r.Key, r.ID) }

func (r Row) fence() string {
	if r.Fence == "" {
		return DefaultFenceColumn
	}
	return r.Fence
}

// Querier is what Update runs on: a *sql.DB, a *sql.Tx or a *sql.Conn. On
// SQLite, a *sql.DB's or *sql.Conn's connection without a busy timeout gets
// the Fence's (WithBusyTimeout), as in Do; a *sql.Tx's is the caller's
// business: open the database with a busy timeout, and with
// _txlock=immediate if the transaction reads before it writes (see
// docs/fencing.md), or concurrent writers fail at once with SQLITE_BUSY
// (ErrConflict).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Update runs, on q, UPDATE <Table> SET <set>, <Fence> = token WHERE
// <Key> = <ID> AND COALESCE(<Fence>, 0) <= token: the check and the write in
// one statement. set is the caller's assignments with the dialect's
// placeholders for args, numbered from 1 ("balance = $1" on PostgreSQL,
// "balance = ?" on SQLite); any other count is refused with
// ErrPlaceholders. Never build set from untrusted input: it is SQL. When no
// row changed, Update returns a *fence.StaleError (fence.ErrStale) with the
// row's larger token, or ErrNoRow. After ErrConflict nothing was written,
// but a transaction q may be aborted (see Update in the package
// documentation for quoting, placeholders and every error).
func (f *Fence) Update(ctx context.Context, q Querier, token fence.Token, row Row, set string, args ...any) error {
	return fence.Reported(f.update(ctx, q, token, row, set, args), nil, f.OnStale)
}

func (f *Fence) update(ctx context.Context, q Querier, token fence.Token, row Row, set string, args []any) error {
	if err := checkToken(token); err != nil {
		return err
	}
	if err := checkRow(row); err != nil {
		return err
	}
	if set == "" {
		return fmt.Errorf("%w: nothing to set on %v", ErrBadName, row)
	}
	switch high, err := f.d.setParams(set); {
	case err != nil:
		return fmt.Errorf("%w: %w in %q", ErrPlaceholders, err, set)
	case high != len(args):
		return fmt.Errorf("%w: %q uses placeholders up to %s, but len(args) is %d (Update's own placeholders follow them: %s, %s)",
			ErrPlaceholders, set, f.d.ph(high), len(args), f.d.ph(len(args)+1), f.d.ph(len(args)+2))
	}
	q, done, err := f.busyQuerier(ctx, q)
	if err != nil {
		return err
	}
	defer done()
	n := len(args)
	table, key, fc := f.d.quote(row.Table), f.d.quote(row.Key), f.d.quote(row.fence())
	eq, le, tok := f.d.op("="), f.d.op("<="), f.d.param(n+1, "int8")
	update := fmt.Sprintf("UPDATE %s SET %s, %s = %s WHERE %s %s %s AND COALESCE(%s, 0) %s %s",
		table, set, fc, tok, key, eq, f.d.ph(n+2), fc, le, tok)
	read := fmt.Sprintf("SELECT COALESCE(%s, 0) FROM %s WHERE %s %s %s", fc, table, key, eq, f.d.ph(1))
	all := append(append(make([]any, 0, n+2), args...), int64(token), row.ID)

	// Between the UPDATE and the read the row can appear (or its fence be
	// lowered by someone else's statement): then the UPDATE is tried again.
	for range 3 {
		res, err := q.ExecContext(ctx, update, all...)
		if err != nil {
			return f.rowError(err, row)
		}
		if k, err := res.RowsAffected(); err != nil || k > 0 {
			return err
		}
		var cur int64
		err = q.QueryRowContext(ctx, read, row.ID).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: %v", ErrNoRow, row)
		case err != nil:
			return f.rowError(err, row)
		case fence.Token(cur) > token:
			return &fence.StaleError{Resource: row.String(), Token: token, Highest: fence.Token(cur)}
		}
	}
	return fmt.Errorf("%w: %v kept changing between the update and the read of its fence", ErrConflict, row)
}

// rowError classifies an error of Update's statements.
func (f *Fence) rowError(err error, row Row) error {
	switch name, kind := f.d.missing(err); {
	case kind == ErrNoTable:
		return &SchemaError{Kind: kind, Table: row.Table, Name: name, Err: err}
	case kind == ErrNoColumn && strings.EqualFold(name, row.fence()):
		ddl := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s BIGINT NOT NULL DEFAULT 0", f.d.quote(row.Table), f.d.quote(row.fence()))
		return &SchemaError{Kind: kind, Table: row.Table, Name: name, DDL: ddl, Err: err}
	case kind == ErrNoColumn:
		return &SchemaError{Kind: kind, Table: row.Table, Name: name, Err: err}
	case f.d.retryable(err):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

func checkRow(r Row) error {
	if err := checkName("table", r.Table); err != nil {
		return err
	}
	if err := checkName("key column", r.Key); err != nil {
		return err
	}
	return checkName("fence column", r.fence())
}

// Update is New(db) followed by Update on db: see [Fence.Update]. Unlike
// Do it takes no options, because args is variadic (as ExecContext's) and
// a Go function has one variadic parameter; for WithDialect or
// WithBusyTimeout, the options Update uses, call New(db, opts...) and
// [Fence.Update], which also runs in the caller's *sql.Tx.
func Update(ctx context.Context, db *sql.DB, token fence.Token, row Row, set string, args ...any) error {
	f, err := New(db)
	if err != nil {
		return err
	}
	return f.Update(ctx, db, token, row, set, args...)
}
