package fencesql

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Dialect is the SQL spoken by a database: it decides the placeholders, the
// upsert statement and the DDL.
type Dialect string

// The supported dialects.
const (
	// Postgres is PostgreSQL (drivers: pgx's stdlib, lib/pq).
	Postgres Dialect = "postgres"
	// SQLite is SQLite 3.24 or later, for its upsert (drivers:
	// modernc.org/sqlite, mattn/go-sqlite3, ncruces/go-sqlite3).
	SQLite Dialect = "sqlite"
)

// drivers maps the package path of a database/sql driver's type to its
// dialect. MySQL's driver is known so that its error can say it is not
// supported rather than unknown. The tests use pgx and modernc.org/sqlite;
// the others are recognised by name only.
var drivers = []struct {
	pkg     string // a path prefix of the driver type's package
	dialect Dialect
}{
	{"github.com/jackc/pgx/", Postgres}, // v4 and v5: *stdlib.Driver
	{"github.com/lib/pq", Postgres},     // *pq.Driver
	{"modernc.org/sqlite", SQLite},      // *sqlite.Driver
	{"github.com/mattn/go-sqlite3", SQLite},
	{"github.com/ncruces/go-sqlite3/", SQLite},
	{"github.com/go-sql-driver/mysql", ""}, // *mysql.MySQLDriver: not supported
}

// detect names the dialect of drv by its type's package (reflect), so that
// this package imports no driver.
func detect(drv driver.Driver) (Dialect, error) {
	t := reflect.TypeOf(drv)
	if t == nil {
		return "", fmt.Errorf("%w: the database has no driver (pass WithDialect)", ErrUnknownDriver)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, d := range drivers {
		if strings.HasPrefix(t.PkgPath(), d.pkg) {
			if d.dialect == "" {
				return "", fmt.Errorf("%w: %s (MySQL and MariaDB are not supported; PostgreSQL and SQLite are)", ErrUnknownDriver, reflect.TypeOf(drv))
			}
			return d.dialect, nil
		}
	}
	return "", fmt.Errorf("%w: %s from %s (known: pgx, lib/pq, modernc.org/sqlite, mattn/go-sqlite3, ncruces/go-sqlite3; for another PostgreSQL or SQLite driver pass WithDialect)",
		ErrUnknownDriver, reflect.TypeOf(drv), t.PkgPath())
}

func (d Dialect) valid() bool { return d == Postgres || d == SQLite }

// Placeholder returns the n-th (from 1) positional placeholder: $n for
// PostgreSQL, ?n for SQLite. Both may be repeated to bind one argument
// twice. Use it to write the statements of a function given to Do for
// either database.
func (d Dialect) Placeholder(n int) string { return d.ph(n) }

func (d Dialect) ph(n int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?" + strconv.Itoa(n)
}

// checkIsolation refuses an isolation level the database does not have.
func (d Dialect) checkIsolation(l sql.IsolationLevel) error {
	if d != Postgres {
		return nil
	}
	switch l {
	case sql.LevelDefault, sql.LevelReadUncommitted, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable:
		return nil
	}
	return fmt.Errorf("%w: PostgreSQL has no %v (it has READ COMMITTED, its default, REPEATABLE READ, its snapshot isolation, and SERIALIZABLE)", ErrIsolation, l)
}

// quote returns name (checked by checkName: one or two plain
// identifiers) quoted by d's rules, each part on its own, so that a name
// that is also a keyword or a function (order, user, current_user, true,
// current_date) is the table or column of that name and nothing else.
//
// PostgreSQL: "part", folded to lower case first, as PostgreSQL folds an
// unquoted name, so that a name means what it meant unquoted. SQLite:
// `part` (its names ignore ASCII case quoted or not). Not "part": SQLite
// takes a double-quoted name that matches no column for a string literal,
// so WHERE "nosuch" = 'nosuch' would be true on every row.
func (d Dialect) quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if d == Postgres {
			p = strings.ToLower(p)
		}
		parts[i] = d.quotePart(p)
	}
	return strings.Join(parts, ".")
}

// quotePart quotes one name as it is (no folding).
func (d Dialect) quotePart(p string) string {
	if d == Postgres {
		return `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return "`" + strings.ReplaceAll(p, "`", "``") + "`"
}

// The rule of every PostgreSQL statement this package writes (and
// internal/pgtrust's and pglock's): it names only pg_catalog's operators,
// functions and types. An operator is written OPERATOR(pg_catalog.op), a
// function pg_catalog.f, a type pg_catalog.t, and Do's own parameters are
// cast to the column's pg_catalog type. Unqualified, PostgreSQL looks them
// up through search_path, and a role with CREATE on one of its schemas
// (public, for every role, before PostgreSQL 15) can plant an operator
// that wins: one whose argument types match exactly where pg_catalog's
// needs a cast (varchar = varchar: pg_catalog has only text = text), or a
// same-signature copy when search_path lists its schema before pg_catalog.
// The planted function then runs as the application's role, which can
// write the fence table (CVE-2018-1058). COALESCE, casts between built-in
// types and ON CONFLICT's index are no lookups by name. Update's set
// clause is the caller's SQL, resolved with the caller's search_path.

// op returns the binary operator o as d's statements write it.
func (d Dialect) op(o string) string {
	if d == Postgres {
		return "OPERATOR(pg_catalog." + o + ")"
	}
	return o
}

// param returns the n-th placeholder, cast on PostgreSQL to the pg_catalog
// type typ (text or int8), so that the operator it meets is chosen by that
// exact type.
func (d Dialect) param(n int, typ string) string {
	if d == Postgres {
		return d.ph(n) + "::pg_catalog." + typ
	}
	return d.ph(n)
}

// ddl is the fence table's CREATE TABLE statement; table is quoted. On
// PostgreSQL resource is text, not varchar, so that an ad-hoc query's
// resource = '...' (text = text) has an exact match in pg_catalog; tables
// made by earlier versions (VARCHAR(200)) work as well with this package's
// qualified statements.
func (d Dialect) ddl(table string) string {
	if d == Postgres {
		return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (resource pg_catalog.text PRIMARY KEY CHECK (pg_catalog.octet_length(resource) OPERATOR(pg_catalog.<=) %d), "+
			"token BIGINT NOT NULL CHECK (token OPERATOR(pg_catalog.>) 0))", table, MaxResourceLen)
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL CHECK (token > 0))", table)
}

// advance is the fence statement on table, quoted ($1 resource, $2 token): insert the fence
// row, or raise its token if the stored one is not larger. It changes one
// row when the token is accepted and none when it is stale. On PostgreSQL
// the conflicting row is locked first and the WHERE evaluated on its newest
// version, also under READ COMMITTED, so a concurrent writer waits for our
// commit and then re-checks against our token. On SQLite the statement
// takes the database's write lock, held until commit.
func (d Dialect) advance(table string) string {
	return fmt.Sprintf("INSERT INTO %s AS f (resource, token) VALUES (%s, %s) ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token %s excluded.token",
		table, d.param(1, "text"), d.param(2, "int8"), d.op("<="))
}

// highest reads a fence row's token ($1 resource).
func (d Dialect) highest(table string) string {
	return fmt.Sprintf("SELECT token FROM %s WHERE resource %s %s", table, d.op("="), d.param(1, "text"))
}

// ---- errors, classified without importing a driver ----

// sqlState returns the SQLSTATE of a PostgreSQL error reported by the
// server (pgx's *pgconn.PgError, lib/pq's *pq.Error), or "".
func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// SQLite's primary result codes used here.
const (
	sqliteBusy   = 5 // SQLITE_BUSY: another connection holds the lock
	sqliteLocked = 6 // SQLITE_LOCKED: a conflict within a shared cache
)

// sqliteCode returns the primary result code of a SQLite error, from
// modernc's Code() or, for drivers that expose none as a method, from
// the library's fixed messages; 0 if err is no SQLite error.
func sqliteCode(err error) int {
	var e interface{ Code() int }
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "database is locked"), strings.Contains(msg, "SQLITE_BUSY"):
		return sqliteBusy
	case strings.Contains(msg, "database table is locked"), strings.Contains(msg, "SQLITE_LOCKED"):
		return sqliteLocked
	}
	return 0
}

// retryable reports whether err says the database refused the statement
// because of a concurrent transaction, having applied nothing: a
// serialization failure or a deadlock on PostgreSQL, a busy or locked
// database on SQLite.
func (d Dialect) retryable(err error) bool {
	if d == Postgres {
		s := sqlState(err)
		return s == "40001" || s == "40P01"
	}
	c := sqliteCode(err)
	return c == sqliteBusy || c == sqliteLocked
}

// missing reports whether err says a table (kind ErrNoTable) or a column
// (ErrNoColumn) does not exist, and which one if the message names it.
func (d Dialect) missing(err error) (name string, kind error) {
	if d == Postgres {
		switch sqlState(err) {
		case "42P01":
			return quoted(err.Error()), ErrNoTable
		case "42703":
			return quoted(err.Error()), ErrNoColumn
		}
		return "", nil
	}
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "no such table: "); ok {
		return firstWord(after), ErrNoTable
	}
	if _, after, ok := strings.Cut(msg, "no such column: "); ok {
		return firstWord(after), ErrNoColumn
	}
	return "", nil
}

// quoted returns the first double-quoted name in PostgreSQL's message
// (`relation "x" does not exist`, `column "y" does not exist`).
func quoted(msg string) string {
	_, after, ok := strings.Cut(msg, `"`)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(after, `"`)
	return name
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " ()"); i >= 0 {
		return s[:i]
	}
	return s
}
