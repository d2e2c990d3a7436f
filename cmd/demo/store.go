package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", for ZKRECIPES_DEMO_DSN
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	_ "modernc.org/sqlite" // "sqlite", the default
)

// store is scene 1's protected resource: a row of table
// zkrecipes_demo_storage in a real database, written only through
// fencesql.Do, so that the database itself refuses a stale holder.
type store struct {
	db    *sql.DB
	f     *fencesql.Fence
	what  string // for the narration
	close func()
	p     func(int) string
}

// openStore opens the PostgreSQL database of dsn, or a SQLite file in a new
// temporary directory when dsn is empty, and creates the two tables if
// missing.
func openStore(ctx context.Context, dsn string) (*store, error) {
	st := &store{}
	var err error
	if dsn != "" {
		st.what = "PostgreSQL (ZKRECIPES_DEMO_DSN)"
		st.db, err = sql.Open("pgx", dsn)
		st.close = func() { st.db.Close() }
	} else {
		dir, derr := os.MkdirTemp("", "zkrecipes-demo-")
		if derr != nil {
			return nil, derr
		}
		file := filepath.Join(dir, "demo.db")
		st.what = "SQLite file " + file + " (set ZKRECIPES_DEMO_DSN for PostgreSQL)"
		st.db, err = sql.Open("sqlite", file)
		st.close = func() { st.db.Close(); os.RemoveAll(dir) }
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*store, error) {
		st.close()
		return nil, fmt.Errorf("scene 1's database, %s: %w", st.what, err)
	}
	if st.f, err = fencesql.New(st.db); err != nil {
		return fail(err)
	}
	st.p = st.f.Dialect().Placeholder
	if err := st.f.CreateTable(ctx); err != nil {
		return fail(err)
	}
	if _, err := st.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS zkrecipes_demo_storage (k VARCHAR(200) PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		return fail(err)
	}
	return st, nil
}

// write stores v under resource if tok is not older than the last token the
// database accepted for it.
func (st *store) write(ctx context.Context, resource string, tok fence.Token, v string) error {
	return st.f.Do(ctx, resource, tok, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO zkrecipes_demo_storage (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
			st.p(1), st.p(2)), resource, v)
		return err
	})
}

// read returns the value stored under resource and the highest token the
// database accepted for it.
func (st *store) read(ctx context.Context, resource string) (string, fence.Token, error) {
	var v string
	err := st.db.QueryRowContext(ctx, "SELECT v FROM zkrecipes_demo_storage WHERE k = "+st.p(1), resource).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", 0, err
	}
	high, err := st.f.Highest(ctx, resource)
	return v, high, err
}

// forget deletes the demo's rows of resource (the tables stay), so that a
// run leaves a user's PostgreSQL as it found it. Deleting a fence row drops
// its high-water mark: the demo may, since its resource names (the run's
// znode root) are never used again; an application must not.
func (st *store) forget(resource string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st.db.ExecContext(ctx, "DELETE FROM zkrecipes_demo_storage WHERE k = "+st.p(1), resource)
	st.db.ExecContext(ctx, "DELETE FROM "+fencesql.DefaultTable+" WHERE resource = "+st.p(1), resource)
}
