package fencesql_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// TestIdentifiersQuoted: table and column names are quoted by the
// dialect's rules, so a name that is also a keyword or a function is that
// table or column: Key "current_user" (PostgreSQL) or "current_date"
// (SQLite) once compared the function with the key and updated every row
// in one call; order and user failed with syntax errors; and a name that
// matches no column is an error, not a string (SQLite's "…" would be).
func TestIdentifiersQuoted(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		p := f.Dialect().Placeholder
		fn, col := "current_date", `"current_date"`
		if f.Dialect() == fencesql.Postgres {
			fn, col = "current_user", `"current_user"`
		}
		var now string // what the function returns, the key of row 1
		if err := db.QueryRowContext(ctx, "SELECT CAST("+fn+" AS TEXT)").Scan(&now); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "CREATE TABLE kw (id BIGINT PRIMARY KEY, "+col+" TEXT UNIQUE NOT NULL, n BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0)")
		if _, err := db.ExecContext(ctx, "INSERT INTO kw (id, "+col+") VALUES (1, "+p(1)+"), (2, 'other'), (3, 'third')", now); err != nil {
			t.Fatal(err)
		}
		err = f.Update(ctx, db, 5, fencesql.Row{Table: "kw", Key: fn, ID: now}, "n = "+p(1), 1)
		if err != nil || count(t, db, "SELECT * FROM kw WHERE n = 1") != 1 || count(t, db, "SELECT * FROM kw WHERE id = 1 AND n = 1") != 1 {
			t.Fatalf("Key %q: %v; %d rows changed, want row 1 only", fn, err, count(t, db, "SELECT * FROM kw WHERE n = 1"))
		}

		// A key that names no column is an error, and changes nothing.
		err = f.Update(ctx, db, 6, fencesql.Row{Table: "kw", Key: "nosuch", ID: "nosuch"}, "n = "+p(1), 2)
		if !errors.Is(err, fencesql.ErrNoColumn) || count(t, db, "SELECT * FROM kw WHERE n = 2") != 0 {
			t.Fatalf("Key nosuch: %v", err)
		}

		// Keywords as table and column names.
		mustExec(t, db, `CREATE TABLE "order" ("user" TEXT PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0, "select" BIGINT NOT NULL DEFAULT 0)`,
			`INSERT INTO "order" ("user") VALUES ('alice'), ('bob')`)
		row := fencesql.Row{Table: "order", Key: "user", ID: "alice", Fence: "select"}
		if err := f.Update(ctx, db, 7, row, "n = "+p(1), 3); err != nil {
			t.Fatalf("Update on order(user): %v", err)
		}
		if err := f.Update(ctx, db, 6, row, "n = "+p(1), 4); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale Update on order(user): %v", err)
		}
		if count(t, db, `SELECT * FROM "order" WHERE n = 3 AND "select" = 7`) != 1 || count(t, db, `SELECT * FROM "order" WHERE n <> 0`) != 1 {
			t.Fatal("Update on order(user) changed the wrong rows")
		}
		keywordFenceTable(t, db)
	})
}

// keywordFenceTable: the fence table may be named by a keyword, and on
// PostgreSQL a mixed-case name still means its lower-case table, as it did
// unquoted.
func keywordFenceTable(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := ctxT(t)
	for _, name := range []string{"group", "Fence_Mixed"} {
		f := newFence(t, db, fencesql.WithTable(name))
		if err := f.Do(ctx, "r", 9, nil); err != nil {
			t.Fatalf("Do on table %s: %v", name, err)
		}
		if h, err := f.Highest(ctx, "r"); err != nil || h != 9 {
			t.Fatalf("Highest on table %s: %v, %v", name, h, err)
		}
	}
	if count(t, db, "SELECT * FROM fence_mixed WHERE token = 9") != 1 {
		t.Fatal("WithTable(Fence_Mixed) did not use the table fence_mixed")
	}
}

// quoted is name as the dialect quotes it in statements and DDL.
func quoted(d fencesql.Dialect, name string) string {
	if d == fencesql.Postgres {
		return `"` + name + `"`
	}
	return "`" + name + "`"
}
