package fencesql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RaiseColumnFloor is RaiseFloor for the fence columns that Update checks:
// it runs, on q, the one statement
//
//	UPDATE <table> SET <fenceColumn> = floor
//	 WHERE COALESCE(<fenceColumn>, 0) < floor
//
// which raises the fence of every row of table that is below floor to
// floor, so that every later Update with a token below floor is refused
// (fence.ErrStale) on each of them; rows already above floor keep their
// fence, none is ever lowered. It returns how many rows it raised. An
// empty fenceColumn is DefaultFenceColumn. Names are quoted, and on
// PostgreSQL the operators and floor's type written as pg_catalog's, as
// in Update; on SQLite a *sql.DB's or *sql.Conn's connection without a
// busy timeout gets the Fence's, as in Update. It is the operator's step
// of a switch of lock backend for a table fenced with Update: raise it
// to the new era's Floor (docs/backends.md#switching-backends).
//
// The statement is atomic with every Update: on PostgreSQL an old-era
// Update that commits first is raised over, one that comes later waits
// for the raise's row lock and then finds the floor (also under READ
// COMMITTED, where the WHERE is checked again on the row's newest
// version); on SQLite the two take the database's write lock in turn. The
// raise holds the row locks of every row it raises until the statement
// (or q's transaction) ends: on a large table run it when writes are few.
// It covers the rows that exist when it runs: a row inserted later has
// the fence its INSERT gives it, and the default 0 accepts any token, so
// insert rows with the inserting holder's token (or the era's floor) in
// the fence column.
//
// Errors: fence.ErrNoToken, ErrTokenRange (a floor above fence.MaxToken,
// matching fence.ErrTokenOverflow as every fence's refusal does), a
// *fence.RangeError (fence.ErrTokenOverflow) for a floor above
// fence.MaxFloor, which no era reaches, or ErrBadName before any statement; a *SchemaError (ErrNoTable,
// ErrNoColumn with the ALTER TABLE that adds the fence column) when the
// table or the column is missing; ErrConflict when the database refused
// the statement for a concurrent transaction; otherwise the driver's
// error. The statement is idempotent: after any error, run it again.
func (f *Fence) RaiseColumnFloor(ctx context.Context, q Querier, table, fenceColumn string, floor fence.Token) (int64, error) {
	if err := checkFloor(floor); err != nil {
		return 0, err
	}
	if fenceColumn == "" {
		fenceColumn = DefaultFenceColumn
	}
	if err := checkName("table", table); err != nil {
		return 0, err
	}
	if err := checkName("fence column", fenceColumn); err != nil {
		return 0, err
	}
	q, done, err := f.busyQuerier(ctx, q)
	if err != nil {
		return 0, err
	}
	defer done()
	fc, tok := f.d.quote(fenceColumn), f.d.param(1, "int8")
	raise := fmt.Sprintf("UPDATE %s SET %s = %s WHERE COALESCE(%s, 0) %s %s",
		f.d.quote(table), fc, tok, fc, f.d.op("<"), tok)
	res, err := q.ExecContext(ctx, raise, int64(floor))
	if err != nil {
		return 0, f.rowError(err, Row{Table: table, Fence: fenceColumn})
	}
	return res.RowsAffected()
}

// RaiseColumnFloor is New(db, opts...) followed by RaiseColumnFloor on db:
// see [Fence.RaiseColumnFloor].
func RaiseColumnFloor(ctx context.Context, db *sql.DB, table, fenceColumn string, floor fence.Token, opts ...Option) (int64, error) {
	f, err := New(db, opts...)
	if err != nil {
		return 0, err
	}
	return f.RaiseColumnFloor(ctx, db, table, fenceColumn, floor)
}

// busyQuerier returns q for one of Update's or RaiseColumnFloor's
// statements: on SQLite with a busy timeout to give (WithBusyTimeout), a
// *sql.DB's connection taken for it, or a *sql.Conn, gets it if it has
// none, as in Do (a pool connection without one would refuse the UPDATE
// at once while another connection writes); a *sql.Tx is the caller's.
// done releases what it took.
func (f *Fence) busyQuerier(ctx context.Context, q Querier) (Querier, func(), error) {
	done := func() {}
	if f.d != SQLite || f.busy <= 0 {
		return q, done, nil
	}
	if db, ok := q.(*sql.DB); ok {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		q, done = conn, func() { conn.Close() }
	}
	if c, ok := q.(*sql.Conn); ok {
		if err := f.ensureBusyTimeout(ctx, c); err != nil {
			done()
			return nil, nil, err
		}
	}
	return q, done, nil
}
