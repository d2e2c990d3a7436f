package fencesql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
)

// RaiseColumnFloor is RaiseFloor for the fence columns that Update checks:
// one statement on q raises the fence of every row of table below floor to
// floor (an empty fenceColumn is DefaultFenceColumn), so that every later
// Update with a token below floor is refused on each; no fence is ever
// lowered. It returns how many rows it raised. The statement is atomic
// with every Update and idempotent: after any error, run it again. Rows
// inserted later keep the fence their INSERT gives them (see Raising a
// column's floor in the package documentation for the statement, its
// locks and its errors).
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
