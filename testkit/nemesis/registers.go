package nemesis

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// The registers.
const (
	RegGuard = "guard" // an in-process value behind a fence.Guard
	RegZnode = "znode" // a fencezk.Register: a znode written with a versioned compare-and-set of the token
	RegSQL   = "sql"   // a row of a SQL database written in fencesql.Do (Config.SQL)
)

// writeGuard writes the in-process register inside guard.Do. The write's
// order is the guard's counter.
func (w *workload) writeGuard(c *client, g *Grant, val string) {
	op := Op{Kind: OpWrite, Client: c.id, Grant: g.ID, Token: g.Token, Register: RegGuard, Value: val, Call: w.rec.now()}
	err := w.guard.Do(RegGuard, g.Token, func() error {
		w.gseq++
		op.Seq, op.Prev = w.gseq, w.gstate
		w.gstate = State{g.Token, val}
		op.Live = w.rec.live()
		return nil
	})
	op.Return = w.rec.now()
	switch {
	case err == nil:
		op.Outcome = Accepted
	case errors.Is(err, fence.ErrStale):
		op.Outcome, op.Err = Stale, err.Error()
	default:
		op.Outcome, op.Err = Failed, err.Error()
	}
	w.rec.op(op)
}

// writeTarget writes val to one of the target's registers; the write's
// sample is taken where the register calls live.
func (w *workload) writeTarget(c *client, g *Grant, reg Register, val string) {
	op := Op{Kind: OpWrite, Client: c.id, Grant: g.ID, Token: g.Token, Register: reg.Name, Value: val, Call: w.rec.now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prev, seq, err := reg.Write(ctx, c.id, g.Token, val, func() { op.Live = w.rec.live() })
	op.Return = w.rec.now()
	op.Outcome, op.Err = outcome(err)
	if err == nil {
		op.Prev, op.Seq = prev, seq
	}
	w.rec.op(op)
}

// outcome classifies a fenced write's error.
func outcome(err error) (Outcome, string) {
	switch {
	case err == nil:
		return Accepted, ""
	case errors.Is(err, fence.ErrStale):
		return Stale, err.Error()
	case errors.Is(err, fence.ErrUncertain):
		return Unknown, err.Error()
	}
	return Failed, err.Error()
}

// sqlRegister is the SQL register: the row named res of nemesis_register,
// written in fencesql.Do with res as the fenced resource.
type sqlRegister struct {
	f           *fencesql.Fence
	res         string
	read, write string
}

func newSQLRegister(ctx context.Context, db *sql.DB, res string) (*sqlRegister, error) {
	f, err := fencesql.New(db)
	if err != nil {
		return nil, fmt.Errorf("nemesis: SQL register: %w", err)
	}
	p := f.Dialect().Placeholder
	r := &sqlRegister{f: f, res: res,
		read:  "SELECT token, value, seq FROM nemesis_register WHERE name = " + p(1),
		write: fmt.Sprintf("UPDATE nemesis_register SET token = %s, value = %s, seq = %s WHERE name = %s", p(1), p(2), p(3), p(4))}
	for _, stmt := range []struct {
		q    string
		args []any
	}{
		{f.DDL(), nil},
		{"CREATE TABLE IF NOT EXISTS nemesis_register (name VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL, value TEXT NOT NULL, seq BIGINT NOT NULL)", nil},
		{"DELETE FROM " + fencesql.DefaultTable + " WHERE resource = " + p(1), []any{res}},
		{"DELETE FROM nemesis_register WHERE name = " + p(1), []any{res}},
		{"INSERT INTO nemesis_register (name, token, value, seq) VALUES (" + p(1) + ", 0, '', 0)", []any{res}},
	} {
		if _, err := db.ExecContext(ctx, stmt.q, stmt.args...); err != nil {
			return nil, fmt.Errorf("nemesis: SQL register: %s: %w", stmt.q, err)
		}
	}
	return r, nil
}

// writeSQL reads the register's row and writes it in the transaction that
// fencesql.Do advanced the fence row in. The write's order is the row's
// counter.
func (w *workload) writeSQL(c *client, g *Grant, val string) {
	op := Op{Kind: OpWrite, Client: c.id, Grant: g.ID, Token: g.Token, Register: RegSQL, Value: val, Call: w.rec.now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var prev State
	var seq int64
	err := w.sql.f.Do(ctx, w.sql.res, g.Token, func(tx *sql.Tx) error {
		var tok int64
		if err := tx.QueryRowContext(ctx, w.sql.read, w.sql.res).Scan(&tok, &prev.Value, &seq); err != nil {
			return err
		}
		prev.Token = fence.Token(tok)
		if _, err := tx.ExecContext(ctx, w.sql.write, int64(g.Token), val, seq+1, w.sql.res); err != nil {
			return err
		}
		op.Live = w.rec.live()
		return nil
	})
	op.Return = w.rec.now()
	op.Outcome, op.Err = outcome(err)
	if err == nil {
		op.Prev, op.Seq = prev, seq+1
	}
	w.rec.op(op)
}
