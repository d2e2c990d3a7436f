package fencesql

import "testing"

// TestSetParams: the placeholder count of a set clause, or its refusal
// when a lexer could misread it (pure logic; TestUpdateSetClauseTricks and
// TestUpdateSetClauseAllowed run such clauses against the databases).
func TestSetParams(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		set  string
		want int // -1: refused
	}{
		{Postgres, "a = 1", 0},
		{Postgres, "a = $1, b = $2", 2},
		{Postgres, "a = $2", 2},
		{Postgres, "a = $10::int", 10},
		{Postgres, "a = 'x $3 '' $4'", 0}, // '' inside a literal
		{Postgres, `"col $2""x" = $1`, 1}, // a quoted identifier
		{Postgres, "a = E'x $2' || U&'y' || $1", 1},
		{Postgres, "a = b[$1:$2] ? 'k' # 1", 2}, // subscripts, operators
		{Postgres, "a = $1,\r\n\tb = $2", 2},
		{Postgres, "a = a$1 + $1", -1}, // a$1 is an identifier
		{Postgres, "a = 1$1", -1},      // one token or two by version
		{Postgres, "a = $1_0", -1},     // $10 in PostgreSQL 16
		{Postgres, "a = $1a", -1},
		{Postgres, "a = $0", -1},
		{Postgres, `a = E'\' || $1`, -1}, // any backslash
		{Postgres, `a = '\' || $1`, -1},  // standard_conforming_strings may be off
		{Postgres, "a = $$ $5 $$", -1},   // dollar quoting
		{Postgres, "a = $q$ x $q$", -1},
		{Postgres, "a = $1 /* $2 */", -1}, // comments
		{Postgres, "a = $1 -- $2", -1},
		{Postgres, "a = $1 -- x\r, b = $2", -1},
		{Postgres, "a = $1; DELETE FROM t", -1},
		{Postgres, "a = ($1", -1},
		{Postgres, "a = $1)", -1},
		{Postgres, "a = b[$1", -1},
		{Postgres, "a = 'open", -1},
		{Postgres, `"open = $1`, -1},
		{Postgres, "a = $1 \x00", -1},
		{Postgres, "a = $1 \v", -1},
		{Postgres, "a = é", -1},         // non-ASCII outside quotes
		{Postgres, `a = 'é' || "é"`, 0}, // inside them
		{Postgres, "a = `b`", -1},
		{SQLite, "a = ?, b = ?", 2},
		{SQLite, "a = ?3, b = ?", 4},
		{SQLite, "a = ?1, b = ?1", 1},
		{SQLite, "a = :x, b = @y || :x", 2},
		{SQLite, "a = $1, b = $2", 2}, // named parameters "$1", "$2" in SQLite
		{SQLite, "a = [x ?] || `y ?` || \"z ?\" || 'w ?' || ?", 1},
		{SQLite, "a = `x``?` || ?", 1},
		{SQLite, "a = a$1 || ?", -1},
		{SQLite, "a = $a(x) || ?", -1}, // Tcl variables
		{SQLite, "a = $a::b", -1},
		{SQLite, "a = :", -1},
		{SQLite, "a = #1", -1},
		{SQLite, "a = ?0", -1},
		{SQLite, "a = ?32767", -1},
		{SQLite, "a = ? /* ? */", -1},
		{SQLite, "a = ? -- ?", -1},
		{SQLite, "a = [open", -1},
		{SQLite, "a = ]", -1},
		{SQLite, "a = `open", -1},
		{SQLite, `a = 'x\' || ?`, -1},
	} {
		got, err := c.d.setParams(c.set)
		if c.want < 0 && err == nil || c.want >= 0 && (err != nil || got != c.want) {
			t.Errorf("%s %q: %d, %v; want %d", c.d, c.set, got, err, c.want)
		}
	}
}
