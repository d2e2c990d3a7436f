package fencesql_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// TestUpdatePlaceholderCount: a set clause whose placeholders do not match
// its arguments is refused before any statement, instead of binding the
// library's own values (the token, the key) into the caller's columns.
// Placeholders inside string literals, quoted identifiers and casts are
// not counted; comments are refused (TestUpdateSetClauseTricks).
func TestUpdatePlaceholderCount(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		p := f.Dialect().Placeholder
		mustExec(t, db, `CREATE TABLE acc2 (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL, note TEXT, "q?$2" TEXT NOT NULL DEFAULT 'Q', fence BIGINT NOT NULL DEFAULT 0)`,
			"INSERT INTO acc2 (id, balance, note) VALUES (1, 0, 'orig'), (2, 0, 'other row')")
		row := fencesql.Row{Table: "acc2", Key: "id", ID: 1}
		state := func() (balance int64, note string, tok int64) {
			t.Helper()
			if err := db.QueryRowContext(ctx, "SELECT balance, note, fence FROM acc2 WHERE id = 1").Scan(&balance, &note, &tok); err != nil {
				t.Fatal(err)
			}
			return
		}
		anon := "balance = ?, note = ?"
		if f.Dialect() == fencesql.Postgres {
			anon = "balance = $1, note = $2"
		}
		for _, c := range []struct {
			set  string
			args []any
		}{
			{anon, []any{100}}, // the trial's case: one placeholder too many
			{"balance = " + p(1) + ", note = " + p(3), []any{100, "x"}}, // a gap
			{"balance = " + p(1), []any{100, "unused"}},                 // an argument too many
			{"balance = 1", []any{100}},
			{"note = 'unterminated", nil},
			{"balance = " + p(1) + " /* " + p(3) + " */, note = " + p(2) + " -- " + p(3), []any{6, "c"}}, // comments: refused
		} {
			err := fencesql.Update(ctx, db, 777, row, c.set, c.args...)
			if !errors.Is(err, fencesql.ErrPlaceholders) {
				t.Errorf("Update(%q, %d args): %v, want ErrPlaceholders", c.set, len(c.args), err)
			}
		}
		if b, note, tok := state(); b != 0 || note != "orig" || tok != 0 {
			t.Fatalf("a refused Update changed the row: balance %d, note %q, fence %d", b, note, tok)
		}
		t.Log(fencesql.Update(ctx, db, 777, row, anon, 100))

		placeholderLikeText(t, f, db, row, state)
		// A trailing line comment once swallowed the WHERE clause: every
		// row changed, whatever its fence. Comments are refused now.
		err = fencesql.Update(ctx, db, 1, row, "note = "+p(1)+" -- the note", "stale")
		if !errors.Is(err, fencesql.ErrPlaceholders) || errors.Is(err, fence.ErrStale) {
			t.Errorf("a stale Update with a trailing comment: %v", err)
		}
		if n := count(t, db, "SELECT * FROM acc2 WHERE id = 2 AND note = 'other row' AND fence = 0"); n != 1 {
			t.Errorf("an Update of row 1 changed row 2")
		}
	})
}

// placeholderLikeText: placeholder-like text that is not a placeholder (in
// string literals, quoted identifiers, casts) is not counted.
func placeholderLikeText(t *testing.T, f *fencesql.Fence, db *sql.DB, row fencesql.Row, state func() (int64, string, int64)) {
	t.Helper()
	ctx := ctxT(t)
	p := f.Dialect().Placeholder
	type okCase struct {
		set  string
		args []any
		note string
	}
	ok := []okCase{
		{"balance = " + p(1) + ", note = '" + p(2) + " ?'", []any{5}, p(2) + " ?"},
		{"note = 'it''s " + p(2) + "' || " + p(1), []any{"!"}, "it's " + p(2) + "!"},
		{"balance = CAST(" + p(1) + " AS BIGINT), note = " + p(2), []any{7, "cast"}, "cast"},
		{"note = " + p(1) + " || " + p(1), []any{"8"}, "88"},
		{`note = "q?$2" || ` + p(1), []any{"h"}, "Qh"},
	}
	if f.Dialect() == fencesql.Postgres {
		ok = append(ok,
			okCase{"balance = $1::bigint, note = ' $2 ' || E''' $3' || $2::text", []any{9, "d"}, " $2 ' $3d"})
	} else {
		ok = append(ok,
			okCase{"balance = ?, note = [q?$2] || `q?$2` || ?", []any{10, "f"}, "QQf"},
			okCase{"balance = :b, note = :n || :b", []any{sql.Named("b", 11), sql.Named("n", "g")}, "g11"})
	}
	for _, c := range ok {
		mustExec(t, db, "UPDATE acc2 SET note = 'orig' WHERE id = 1")
		if err := fencesql.Update(ctx, db, 778, row, c.set, c.args...); err != nil {
			t.Errorf("Update(%q): %v", c.set, err)
			continue
		}
		if _, note, tok := state(); note != c.note || tok != 778 {
			t.Errorf("Update(%q): note %q, fence %d; want %q, 778", c.set, note, tok, c.note)
		}
	}
}
