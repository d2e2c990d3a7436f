package fencesql

import "testing"

// TestHighestParam: the placeholder count of a set clause, as each
// database's tokenizer sees it (pure logic; TestUpdatePlaceholderCount runs
// such clauses against the databases).
func TestHighestParam(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		set  string
		want int // -1: an error
	}{
		{Postgres, "a = 1", 0},
		{Postgres, "a = $1, b = $2", 2},
		{Postgres, "a = $2", 2},
		{Postgres, "a = $10::int", 10},
		{Postgres, "a = a$1 + $1", 1},                  // a$1 is an identifier
		{Postgres, "a = 'x $3 '' $4'", 0},              // '' inside a literal
		{Postgres, `a = E'\' $3' || $1`, 1},            // a backslash escape in E'…'
		{Postgres, `a = e'\\' || $2`, 2},               // an escaped backslash ends it
		{Postgres, `a = '\' || $1`, 1},                 // no escape in a standard literal
		{Postgres, `"col $2""x" = $1`, 1},              // a quoted identifier
		{Postgres, "a = $$ $5 $$ || $q$ $$ $6 $q$", 0}, // dollar quoting
		{Postgres, "a = $1 /* $2 /* $3 */ $4 */", 1},   // nested comments
		{Postgres, "a = $1 -- $2\n, b = $2", 2},
		{Postgres, "a = $1 -- $3", 1},
		{Postgres, "a = 'open", -1},
		{Postgres, "a = $1 /* open", -1},
		{Postgres, "a = $$ open", -1},
		{Postgres, `"open = $1`, -1},
		{SQLite, "a = ?, b = ?", 2},
		{SQLite, "a = ?3, b = ?", 4},
		{SQLite, "a = ?1, b = ?1", 1},
		{SQLite, "a = :x, b = @y || :x", 2},
		{SQLite, "a = $1, b = $2", 2}, // named parameters "$1", "$2" in SQLite
		{SQLite, "a = a$1 || ?", 1},
		{SQLite, "a = [x ?] || `y ?` || \"z ?\" || 'w ?' || ?", 1},
		{SQLite, "a = ? /* ? /* ? */ || ?", 2}, // SQLite's comments do not nest
		{SQLite, "a = ? -- ?", 1},
		{SQLite, "a = [open", -1},
		{SQLite, "a = `open", -1},
		{SQLite, "a = ? /* open", -1},
	} {
		got, err := c.d.highestParam(c.set)
		if c.want < 0 && err == nil || c.want >= 0 && (err != nil || got != c.want) {
			t.Errorf("%s %q: %d, %v; want %d", c.d, c.set, got, err, c.want)
		}
	}
}
