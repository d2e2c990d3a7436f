package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// openSQL opens the SQL register's database: kind "postgres" (a database of
// its own on a throwaway server, or on PG_TEST_DSN's), "sqlite" (a file in a
// temporary directory) or "none" (nil). closeDB, idempotent, removes what
// it made.
func openSQL(ctx context.Context, kind string) (db *sql.DB, what string, closeDB func(), err error) {
	switch kind {
	case "none":
		return nil, "none", func() {}, nil
	case "sqlite":
		dir, err := os.MkdirTemp("", "nemesis-sql-")
		if err != nil {
			return nil, "", nil, err
		}
		db, err := sql.Open("sqlite", filepath.Join(dir, "register.db"))
		if err != nil {
			os.RemoveAll(dir)
			return nil, "", nil, err
		}
		return db, "SQLite " + filepath.Join(dir, "register.db"), once(func() { db.Close(); os.RemoveAll(dir) }), nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := pgtest.Launch(sctx)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w (or -sql sqlite)", err)
	}
	dsn, err := srv.NewDatabase(sctx, "nemesis")
	if err == nil {
		db, err = sql.Open("pgx", dsn)
	}
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	var version string
	db.QueryRowContext(sctx, "SHOW server_version").Scan(&version)
	return db, "PostgreSQL " + version + " " + dsn, once(func() {
		db.Close()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.DropDatabase(dctx, dsn)
		srv.Close()
	}), nil
}

func once(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}
