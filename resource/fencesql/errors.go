package fencesql

import (
	"errors"
	"fmt"
)

// Errors of this package, matched with errors.Is. A stale token is reported
// with a *fence.StaleError (fence.ErrStale), a zero token with
// fence.ErrNoToken, an answer lost during a commit with fence.ErrUncertain.
// Bad input is refused before any statement is sent: the database is left
// unchanged.
var (
	// ErrUnknownDriver: New could not tell the database's dialect from its
	// driver, or the driver's database is not supported (MySQL). Pass
	// WithDialect for another PostgreSQL or SQLite driver.
	ErrUnknownDriver = errors.New("fencesql: unknown or unsupported database driver")
	// ErrDialectMismatch: WithDialect names a dialect other than that of
	// the database's driver, which this package knows (SQLite on pgx, say):
	// every statement would be in the wrong SQL.
	ErrDialectMismatch = errors.New("fencesql: WithDialect does not match the driver")
	// ErrIsolation: WithIsolation names a level the database does not have
	// (sql.LevelWriteCommitted, sql.LevelLinearizable or sql.LevelSnapshot
	// on PostgreSQL).
	ErrIsolation = errors.New("fencesql: isolation level not supported by the database")
	// ErrBadResource: a resource name that is empty, longer than
	// MaxResourceLen bytes, not valid UTF-8, or contains a NUL byte.
	ErrBadResource = errors.New("fencesql: bad resource name")
	// ErrBadName: a table or column name that is not a plain SQL
	// identifier (letters, digits, underscores, one optional schema
	// qualifier), or a Row without a table or key.
	ErrBadName = errors.New("fencesql: bad table or column name")
	// ErrTokenRange: a token above 2^63-1 (fence.MaxToken), which a BIGINT
	// cannot hold; the error wraps a *fence.RangeError too, so it matches
	// fence.ErrTokenOverflow, as a Guard's and fencezk's do. No backend's
	// token gets there (they are signed 64-bit numbers).
	ErrTokenRange = errors.New("fencesql: token does not fit a BIGINT")
	// ErrNoTable is matched by a *SchemaError for a missing table.
	ErrNoTable = errors.New("fencesql: table does not exist")
	// ErrNoColumn is matched by a *SchemaError for a missing column.
	ErrNoColumn = errors.New("fencesql: column does not exist")
	// ErrPlaceholders: Update's set clause uses placeholders other than
	// exactly 1 to len(args) (one too many would bind the fencing token or
	// the key into the caller's column), or holds something that could
	// hide a placeholder from the count or swallow what Update appends: a
	// comment, a backslash, a dollar quote, a statement separator, a
	// string or quoted identifier that does not end, unbalanced
	// parentheses, a placeholder touching a name (see Update).
	ErrPlaceholders = errors.New("fencesql: the set clause's placeholders cannot be counted or do not match its arguments")
	// ErrNoRow: Update found no row with the given key (as opposed to a
	// row whose fence holds a larger token: fence.ErrStale).
	ErrNoRow = errors.New("fencesql: no such row")
	// ErrConflict: the database refused a transaction because of a
	// concurrent one after the caller's function had run, or on Update:
	// on PostgreSQL a serialization failure (SQLSTATE 40001, under
	// REPEATABLE READ or SERIALIZABLE) or a deadlock (40P01, at any level,
	// READ COMMITTED included: the function's statements locked rows in
	// another order than a concurrent transaction's); on SQLite a busy
	// database past its busy timeout. Nothing was committed: calling again
	// is safe.
	ErrConflict = errors.New("fencesql: concurrent transaction conflict, nothing committed")
)

// SchemaError reports a table or column that does not exist, with the DDL
// that would create it when this package knows it. It matches ErrNoTable or
// ErrNoColumn.
type SchemaError struct {
	Kind  error  // ErrNoTable or ErrNoColumn
	Table string // the table the statement used
	Name  string // the missing table or column, as the database named it ("" if it did not)
	DDL   string // the statement that creates it, or "" when it is the caller's to write
	Err   error  // the database's error
}

// Error implements error.
func (e *SchemaError) Error() string {
	what := "table " + e.Table
	if e.Kind == ErrNoColumn {
		what = "column " + e.Name + " of " + e.Table
	}
	s := fmt.Sprintf("fencesql: %s does not exist", what)
	switch {
	case e.DDL != "" && e.Kind == ErrNoTable:
		s += "; create it with fencesql.CreateTable or: " + e.DDL
	case e.DDL != "":
		s += "; add it with: " + e.DDL
	}
	return s + " (" + e.Err.Error() + ")"
}

// Is makes a *SchemaError match its Kind.
func (e *SchemaError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the database's error.
func (e *SchemaError) Unwrap() error { return e.Err }
