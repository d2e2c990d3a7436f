package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// exampleDB opens a SQLite file (modernc.org/sqlite, driver "sqlite") with
// an accounts table; with PostgreSQL it would be sql.Open("pgx", dsn).
func exampleDB() (*sql.DB, func()) {
	dir, _ := os.MkdirTemp("", "fencesql-example-")
	db, _ := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	db.Exec("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)")
	db.Exec("INSERT INTO accounts (id, balance) VALUES (42, 0)")
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// The 33/34 scenario with a fence row: holder 34 writes, then holder 33,
// paused until now, tries to; the database refuses it, and its function
// never runs.
func ExampleDo() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	fencesql.CreateTable(ctx, db) // once: the fence table
	setBalance := func(v int) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = 42", v)
			return err
		}
	}

	fmt.Println(fencesql.Do(ctx, db, "accounts/42", 34, setBalance(200)))
	err := fencesql.Do(ctx, db, "accounts/42", 33, setBalance(999)) // lease.Token() of the paused holder
	var balance int
	db.QueryRow("SELECT balance FROM accounts WHERE id = 42").Scan(&balance)
	fmt.Println(errors.Is(err, fence.ErrStale), balance)
	fmt.Println(err)
	// Output:
	// <nil>
	// true 200
	// fence: stale fencing token 33 for "accounts/42": highest accepted is 34
}

// The same with a fence column on the row itself.
func ExampleUpdate() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	row := fencesql.Row{Table: "accounts", Key: "id", ID: 42} // fence column "fence"

	fmt.Println(fencesql.Update(ctx, db, 34, row, "balance = ?", 200))
	err := fencesql.Update(ctx, db, 33, row, "balance = ?", 999)
	fmt.Println(errors.Is(err, fence.ErrStale), err)
	err = fencesql.Update(ctx, db, 35, fencesql.Row{Table: "accounts", Key: "id", ID: 7}, "balance = ?", 1)
	fmt.Println(errors.Is(err, fencesql.ErrNoRow), err)
	// Output:
	// <nil>
	// true fence: stale fencing token 33 for "accounts(id=42)": highest accepted is 34
	// true fencesql: no such row: accounts(id=7)
}
