package fencesql_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// TestUpdate: the fence column's UPDATE accepts a token at least the row's,
// tells a stale token (the row's token in the error) from a missing row,
// and names what is missing in the schema.
func TestUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		p := f.Dialect().Placeholder
		mustExec(t, db, "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL, note TEXT, fence BIGINT)",
			"INSERT INTO accounts (id, balance, fence) VALUES (42, 100, 0), (43, 100, NULL)")
		row := fencesql.Row{Table: "accounts", Key: "id", ID: 42}
		state := func(id int) (balance int64, tok int64) {
			t.Helper()
			var ft sql.NullInt64
			if err := db.QueryRowContext(ctx, "SELECT balance, fence FROM accounts WHERE id = "+p(1), id).Scan(&balance, &ft); err != nil {
				t.Fatal(err)
			}
			return balance, ft.Int64
		}
		set := "balance = " + p(1) + ", note = " + p(2)

		if err := f.Update(ctx, db, 34, row, set, 200, "by 34"); err != nil {
			t.Fatal(err)
		}
		err = f.Update(ctx, db, 33, row, set, 999, "by 33")
		var se *fence.StaleError
		if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Highest != 34 || se.Token != 33 || se.Resource != "accounts(id=42)" {
			t.Fatalf("stale update: %v", err)
		}
		if b, tok := state(42); b != 200 || tok != 34 {
			t.Fatalf("after the stale update: balance %d fence %d", b, tok)
		}
		if err := f.Update(ctx, db, 34, row, "balance = balance + "+p(1), 5); err != nil {
			t.Fatalf("equal token: %v", err)
		}
		if b, _ := state(42); b != 205 {
			t.Fatalf("balance %d after the equal-token update", b)
		}
		if err := f.Update(ctx, db, 1, fencesql.Row{Table: "accounts", Key: "id", ID: 43}, set, 7, "first"); err != nil {
			t.Fatalf("a NULL fence counts as 0: %v", err)
		}
		if err := f.Update(ctx, db, 50, fencesql.Row{Table: "accounts", Key: "id", ID: 44}, set, 1, "x"); !errors.Is(err, fencesql.ErrNoRow) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("missing row: %v", err)
		}

		// In the caller's transaction, rolled back: nothing lands.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Update(ctx, tx, 60, row, set, 600, "in a tx"); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if b, tok := state(42); b != 205 || tok != 34 {
			t.Fatalf("after a rolled back transaction: balance %d fence %d", b, tok)
		}

		updateBadInput(t, f, db, row, set)
		if b, tok := state(42); b != 205 || tok != 34 {
			t.Fatalf("after bad input: balance %d fence %d", b, tok)
		}
		updateMissingSchema(t, f, db)
		// The package-level shorthand.
		if err := fencesql.Update(ctx, db, 10, row, set, 1, "x"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("fencesql.Update: %v", err)
		}
	})
}

// updateBadInput: bad input is refused before any statement.
func updateBadInput(t *testing.T, f *fencesql.Fence, db *sql.DB, row fencesql.Row, set string) {
	t.Helper()
	ctx := ctxT(t)
	for _, c := range []struct {
		row  fencesql.Row
		tok  fence.Token
		set  string
		want error
	}{
		{row, 0, set, fence.ErrNoToken},
		{row, 1 << 63, set, fencesql.ErrTokenRange},
		{fencesql.Row{Table: "accounts; drop table accounts", Key: "id", ID: 42}, 70, set, fencesql.ErrBadName},
		{fencesql.Row{Table: "accounts", Key: "", ID: 42}, 70, set, fencesql.ErrBadName},
		{fencesql.Row{Table: "accounts", Key: "id", ID: 42, Fence: "fence or 1=1"}, 70, set, fencesql.ErrBadName},
		{row, 70, "", fencesql.ErrBadName},
	} {
		if err := f.Update(ctx, db, c.tok, c.row, c.set, 1, "bad"); !errors.Is(err, c.want) {
			t.Errorf("Update(%v, %v, %q): %v, want %v", c.row, c.tok, c.set, err, c.want)
		}
	}
}

// updateMissingSchema: a missing fence column is named with the ALTER TABLE
// that adds it, a missing table by its name.
func updateMissingSchema(t *testing.T, f *fencesql.Fence, db *sql.DB) {
	t.Helper()
	ctx := ctxT(t)
	p := f.Dialect().Placeholder
	mustExec(t, db, "CREATE TABLE plain (id INTEGER PRIMARY KEY, v TEXT)", "INSERT INTO plain VALUES (1, 'a')")
	err := f.Update(ctx, db, 5, fencesql.Row{Table: "plain", Key: "id", ID: 1}, "v = "+p(1), "b")
	var sch *fencesql.SchemaError
	ddl := "ALTER TABLE `plain` ADD COLUMN `fence` BIGINT NOT NULL DEFAULT 0"
	if f.Dialect() == fencesql.Postgres {
		ddl = `ALTER TABLE "plain" ADD COLUMN "fence" BIGINT NOT NULL DEFAULT 0`
	}
	if !errors.Is(err, fencesql.ErrNoColumn) || !errors.As(err, &sch) || sch.DDL != ddl {
		t.Fatalf("missing fence column: %v", err)
	}
	t.Logf("%s: %v", f.Dialect(), err)
	mustExec(t, db, sch.DDL)
	if err := f.Update(ctx, db, 5, fencesql.Row{Table: "plain", Key: "id", ID: 1}, "v = "+p(1), "b"); err != nil {
		t.Fatalf("after the ALTER TABLE: %v", err)
	}
	err = f.Update(ctx, db, 5, fencesql.Row{Table: "nosuch", Key: "id", ID: 1}, "v = "+p(1), "b")
	if !errors.Is(err, fencesql.ErrNoTable) || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("missing table: %v", err)
	}
}
