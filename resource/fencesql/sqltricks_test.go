package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// The token and the key of the tricks' Update calls: a caller's column
// holding either after a call means Update's own value was bound into it.
const (
	trickToken = 777777
	trickKey   = 424242
)

// trick is a set clause that a placeholder counter could misread.
type trick struct {
	name   string
	set    string
	args   []any
	scsOff bool // PostgreSQL: on a session with standard_conforming_strings off
}

// tricks are set clauses with a placeholder hidden from a counter, or
// hidden from the database while the counter sees it: each is refused
// with ErrPlaceholders now, before any statement.
func tricks(d fencesql.Dialect) []trick {
	common := []trick{
		{"line comment", "note = " + d.Placeholder(1) + " -- " + d.Placeholder(3), []any{"a"}, false},
		{"block comment", "note = " + d.Placeholder(1) + " /* " + d.Placeholder(3) + " */", []any{"a"}, false},
		{"unterminated block comment", "note = " + d.Placeholder(1) + " /* ", []any{"a"}, false},
		{"statement separator", "note = " + d.Placeholder(1) + "; SELECT 1", []any{"a"}, false},
		{"backslash in a string", `note = 'a\' || ` + d.Placeholder(1), []any{"a"}, false},
		{"unbalanced parenthesis", "note = (" + d.Placeholder(1), []any{"a"}, false},
	}
	for _, eol := range []string{"\r", "\n", "\f", "\v", "\u2028", "\u0085"} {
		common = append(common, trick{fmt.Sprintf("line comment ended by %q", eol),
			"note = " + d.Placeholder(1) + " -- hidden" + eol + ", n = " + d.Placeholder(3), []any{"a"}, false})
	}
	if d == fencesql.SQLite {
		return append(common,
			// SQLite's Tcl-style variables: $a(x) and $a(y) are two
			// parameters, the second one the token's index.
			trick{"Tcl variable with a suffix", "note = $a(x) || $a(y)", []any{"a"}, false},
			trick{"Tcl variable with ::", "note = $a::b || ?2", []any{"a", "b"}, false},
			trick{"parameter 0", "note = ?0", []any{"a"}, false},
			trick{"# variable", "note = #1", []any{"a"}, false},
		)
	}
	return append(common,
		// With standard_conforming_strings off, '\' does not end: the
		// string is '\' -- ' and $2 (the key) is code.
		trick{"string, standard_conforming_strings off", `note = '\' -- ' || $2`, nil, true},
		trick{"E'' string", `note = E'\' -- ' || $2`, nil, false},
		trick{"dollar quote", "note = $q$ $3 $q$ || $1", []any{"a"}, false},
		trick{"empty dollar quote", "note = $$ $3 $$ || $1", []any{"a"}, false},
		trick{"nested block comment", "note = $1 /* /* */ , n = $3 */", []any{"a"}, false},
		trick{"parameter glued to a name", "note = $1 || a$2", []any{"a"}, false},
		trick{"parameter after a number", "n = 1$3", nil, false},
		trick{"parameter with trailing junk", "n = $1_0", []any{1}, false},
	)
}

// TestUpdateSetClauseTricks: a set clause that hides a placeholder from a
// counter (a comment ended by \r, a string whose end depends on a server
// setting, SQLite's Tcl variables, …) or hides one from the database is
// refused before any statement, so Update's token and key are never bound
// into the caller's columns.
func TestUpdateSetClauseTricks(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "CREATE TABLE tricks (id BIGINT PRIMARY KEY, note TEXT NOT NULL DEFAULT '', n BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0)",
			fmt.Sprintf("INSERT INTO tricks (id) VALUES (%d), (2)", trickKey))
		row := fencesql.Row{Table: "tricks", Key: "id", ID: trickKey}
		for _, c := range tricks(f.Dialect()) {
			t.Run(c.name, func(t *testing.T) {
				err := updateTrick(ctx, t, f, db, row, c)
				leaked := count(t, db, fmt.Sprintf("SELECT * FROM tricks WHERE note LIKE '%%%d%%' OR note LIKE '%%%d%%' OR n IN (%[1]d, %[2]d)", trickToken, trickKey))
				changed := count(t, db, "SELECT * FROM tricks WHERE note <> '' OR n <> 0 OR fence <> 0")
				mustExec(t, db, "UPDATE tricks SET note = '', n = 0, fence = 0")
				if leaked > 0 {
					t.Errorf("%q: the token or the key was written into a caller's column (err %v)", c.set, err)
				}
				if !errors.Is(err, fencesql.ErrPlaceholders) || changed > 0 {
					t.Errorf("%q: %v, %d rows changed; want ErrPlaceholders and none", c.set, err, changed)
				}
			})
		}
	})
}

// updateTrick runs Update with c on db, or on a connection with
// standard_conforming_strings off.
func updateTrick(ctx context.Context, t *testing.T, f *fencesql.Fence, db *sql.DB, row fencesql.Row, c trick) error {
	t.Helper()
	if !c.scsOff {
		return f.Update(ctx, db, trickToken, row, c.set, c.args...)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET standard_conforming_strings = off"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "RESET standard_conforming_strings")
	return f.Update(ctx, conn, trickToken, row, c.set, c.args...)
}

// TestUpdateSetClauseAllowed: what a set clause may hold besides its
// placeholders, counted as the database counts them: strings and quoted
// identifiers (placeholder-like text inside them is not counted), casts,
// functions, subscripts, and on SQLite named and numbered parameters and
// its other quotes.
func TestUpdateSetClauseAllowed(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *sql.DB) {
		ctx := ctxT(t)
		f, err := fencesql.New(db)
		if err != nil {
			t.Fatal(err)
		}
		p := f.Dialect().Placeholder
		mustExec(t, db, `CREATE TABLE okset (id BIGINT PRIMARY KEY, note TEXT NOT NULL DEFAULT '', n BIGINT NOT NULL DEFAULT 0, "q?$2 -- x" TEXT NOT NULL DEFAULT 'Q', fence BIGINT NOT NULL DEFAULT 0)`,
			"INSERT INTO okset (id) VALUES (1)")
		row := fencesql.Row{Table: "okset", Key: "id", ID: 1}
		type okCase struct {
			set  string
			args []any
			note string
		}
		cases := []okCase{
			{"note = '" + p(2) + " ? -- /* $$'", nil, p(2) + " ? -- /* $$"},
			{"note = 'it''s ' || " + p(1), []any{"x"}, "it's x"},
			{`note = "q?$2 -- x" || ` + p(1), []any{"h"}, "Qh"},
			{"n = CAST(" + p(1) + " AS BIGINT) + 1,\r\n\tnote = " + p(2), []any{7, "crlf"}, "crlf"},
			{"note = " + p(1) + " || " + p(1), []any{"8"}, "88"},
			{"note = lower(upper(" + p(1) + "))", []any{"fn"}, "fn"},
		}
		if f.Dialect() == fencesql.Postgres {
			cases = append(cases,
				okCase{"note = (ARRAY[$1::text, 'b'])[2] || E'x' || $1", []any{"a"}, "bxa"},
				okCase{"note = U&'d!0061t!+000061' UESCAPE '!' || $1", []any{"!"}, "data!"})
		} else {
			cases = append(cases,
				okCase{"note = [q?$2 -- x] || `q?$2 -- x` || ?", []any{"f"}, "QQf"},
				okCase{"n = :b, note = :n || :b || ?2 || @c", []any{sql.Named("b", 11), sql.Named("n", "g"), sql.Named("c", "h")}, "g11gh"})
		}
		for _, c := range cases {
			mustExec(t, db, "UPDATE okset SET note = '', fence = 0 WHERE id = 1")
			if err := f.Update(ctx, db, 5, row, c.set, c.args...); err != nil {
				t.Errorf("Update(%q): %v", c.set, err)
				continue
			}
			var note string
			var tok int64
			if err := db.QueryRowContext(ctx, "SELECT note, fence FROM okset WHERE id = 1").Scan(&note, &tok); err != nil {
				t.Fatal(err)
			}
			if note != c.note || tok != 5 {
				t.Errorf("Update(%q): note %q, fence %d; want %q, 5", c.set, note, tok, c.note)
			}
		}
	})
}
