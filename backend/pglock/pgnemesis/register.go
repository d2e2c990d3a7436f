package pgnemesis

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// RegRow names the target's register in histories and reports: a row of
// table pgnemesis_register written in fencesql.Do (PostgreSQL dialect) in
// the run's database, on the same server as the locks.
//
// Its writes go straight to the server on the target's own connections
// (application_name pgnemesis-admin), not through the writing client's
// FaultProxy: the fenced resource is reached by another path than the lock
// server, as in a real deployment, so a client cut off from its lock (or
// paused) still writes, which is the case fencing is for. Server faults do
// hit it (a restart or a pause fails or holds the writes in flight; a
// commit cut short is fencesql's fence.ErrUncertain: an Unknown outcome);
// terminate-backend does not (it ends the clients' lock sessions only).
const RegRow = "pg-row"

// register is the fencesql row, reset by each run's Prepare.
type register struct {
	db            *sql.DB
	f             *fencesql.Fence
	res           string // the run's resource (base+"/register"), set by reset
	readQ, writeQ string
}

// create creates the fence table and the register's table.
func (r *register) create(ctx context.Context, db *sql.DB, f *fencesql.Fence) error {
	r.db, r.f = db, f
	r.readQ = "SELECT token, value, seq FROM pgnemesis_register WHERE name = $1"
	r.writeQ = "UPDATE pgnemesis_register SET token = $1, value = $2, seq = $3 WHERE name = $4"
	if err := f.CreateTable(ctx); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS pgnemesis_register "+
		"(name text PRIMARY KEY, token bigint NOT NULL, value text NOT NULL, seq bigint NOT NULL)")
	return err
}

// reset makes res the register's resource, at token 0, value "", seq 0:
// its fence row is deleted, so that the run's first token is accepted
// whatever an earlier run wrote.
func (r *register) reset(ctx context.Context, res string) error {
	r.res = res
	for _, q := range []string{
		"DELETE FROM " + fencesql.DefaultTable + " WHERE resource = $1",
		"DELETE FROM pgnemesis_register WHERE name = $1",
		"INSERT INTO pgnemesis_register (name, token, value, seq) VALUES ($1, 0, '', 0)",
	} {
		if _, err := r.db.ExecContext(ctx, q, res); err != nil {
			return fmt.Errorf("pgnemesis: register: %s: %w", q, err)
		}
	}
	return nil
}

// write is the Register's Write: the row is read and written in the
// transaction fencesql.Do advanced the fence row in; its order is the
// row's counter.
func (r *register) write(ctx context.Context, _ int, token fence.Token, val string, live func()) (prev nemesis.State, seq int64, err error) {
	err = r.f.Do(ctx, r.res, token, func(tx *sql.Tx) error {
		var tok int64
		if err := tx.QueryRowContext(ctx, r.readQ, r.res).Scan(&tok, &prev.Value, &seq); err != nil {
			return err
		}
		prev.Token = fence.Token(tok)
		if _, err := tx.ExecContext(ctx, r.writeQ, int64(token), val, seq+1, r.res); err != nil {
			return err
		}
		live()
		return nil
	})
	if err != nil {
		return nemesis.State{}, 0, err
	}
	return prev, seq + 1, nil
}
