package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// DefaultTable is the name of the fence table.
const DefaultTable = "zkrecipes_fence"

// MaxResourceLen is the longest resource name, in bytes.
const MaxResourceLen = 200

// DefaultBusyTimeout is the SQLite busy timeout Do gives a connection that
// has none.
const DefaultBusyTimeout = 5 * time.Second

// Option configures a Fence.
type Option func(*config)

type config struct {
	dialect Dialect
	table   string
	iso     sql.IsolationLevel
	busy    time.Duration
	trusted []string
}

// WithDialect sets the dialect instead of detecting it from the driver:
// for a PostgreSQL or SQLite driver this package does not know.
func WithDialect(d Dialect) Option { return func(c *config) { c.dialect = d } }

// WithTable sets the fence table's name (default DefaultTable): a plain
// identifier, optionally schema-qualified ("app.fence"), quoted in every
// statement by the dialect's rules (folded to lower case first on
// PostgreSQL, as an unquoted name is).
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithIsolation sets the isolation level of Do's transactions (default:
// the database's default, READ COMMITTED on PostgreSQL). See the package
// documentation for what each level does. PostgreSQL has READ UNCOMMITTED
// (the same as READ COMMITTED there), READ COMMITTED, REPEATABLE READ and
// SERIALIZABLE: New refuses any other level (sql.LevelWriteCommitted,
// sql.LevelLinearizable, sql.LevelSnapshot: use LevelRepeatableRead, its
// snapshot isolation) with ErrIsolation. SQLite is always serializable:
// modernc.org/sqlite ignores the level; other drivers may refuse some at
// the first Do.
func WithIsolation(l sql.IsolationLevel) Option { return func(c *config) { c.iso = l } }

// WithBusyTimeout sets the busy timeout Do gives a SQLite connection whose
// busy timeout is 0 (default DefaultBusyTimeout); 0 leaves connections as
// they are. A connection with a busy timeout of its own (a DSN's
// _busy_timeout or _pragma=busy_timeout(ms)) keeps it.
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busy = d } }

// Fence runs fenced writes on one database. It is safe for concurrent use.
type Fence struct {
	db      *sql.DB
	d       Dialect
	table   string
	txOpts  *sql.TxOptions
	busy    time.Duration
	trusted []string
	checked atomic.Pointer[table] // the fence table, once found trusted

	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token (Do, Admit, Update): wire
	// recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// New returns a Fence for db. It sends nothing. Errors: ErrUnknownDriver
// when the dialect is neither given nor detected; ErrDialectMismatch when
// WithDialect names another dialect than that of a driver this package
// knows; ErrBadName for a bad table name; ErrIsolation for a level the
// database does not have.
func New(db *sql.DB, opts ...Option) (*Fence, error) {
	c := config{table: DefaultTable, busy: DefaultBusyTimeout}
	for _, o := range opts {
		o(&c)
	}
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrUnknownDriver)
	}
	detected, derr := detect(db.Driver())
	switch {
	case c.dialect == "" && derr != nil:
		return nil, derr
	case c.dialect == "":
		c.dialect = detected
	case !c.dialect.valid():
		return nil, fmt.Errorf("%w: dialect %q (known: %q, %q)", ErrUnknownDriver, c.dialect, Postgres, SQLite)
	case derr == nil && detected != c.dialect:
		return nil, fmt.Errorf("%w: WithDialect(%q), but the driver %T is %s's", ErrDialectMismatch, c.dialect, db.Driver(), detected)
	}
	if err := checkName("table", c.table); err != nil {
		return nil, err
	}
	if err := c.dialect.checkIsolation(c.iso); err != nil {
		return nil, err
	}
	f := &Fence{db: db, d: c.dialect, table: c.table, busy: max(c.busy, 0), trusted: c.trusted}
	if c.iso != sql.LevelDefault {
		f.txOpts = &sql.TxOptions{Isolation: c.iso}
	}
	return f, nil
}

// Dialect returns the dialect in use.
func (f *Fence) Dialect() Dialect { return f.d }

// DDL returns the statement that creates the fence table if it does not
// exist. CreateTable runs it with the table's schema named.
func (f *Fence) DDL() string { return f.d.ddl(f.d.quote(f.table)) }

// CreateTable creates the fence table if it does not exist (DDL), and
// checks it as Do does: an existing table that is not trusted is refused
// with ErrUntrustedTable (see [WithTrustedRoles]), also when someone else
// created it between the check and the CREATE.
func (f *Fence) CreateTable(ctx context.Context) error {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	t, err := f.fenceTable(ctx, conn)
	if err != nil || t.exists {
		return err
	}
	if _, err := conn.ExecContext(ctx, f.d.ddl(t.name)); err != nil {
		return err
	}
	if t, err = f.fenceTable(ctx, conn); err == nil && !t.exists {
		err = fmt.Errorf("fencesql: %s does not exist after its CREATE TABLE", t.name)
	}
	return err
}

// schemaError turns a missing fence table into a *SchemaError with the DDL.
func (f *Fence) schemaError(err error) error {
	if name, kind := f.d.missing(err); kind == ErrNoTable {
		return &SchemaError{Kind: kind, Table: f.table, Name: name, DDL: f.DDL(), Err: err}
	}
	return err
}

// Highest returns the highest token accepted for resource (zero if none).
// Errors as Do's: ErrBadResource, ErrUntrustedTable, a *SchemaError.
func (f *Fence) Highest(ctx context.Context, resource string) (fence.Token, error) {
	if err := checkResource(resource); err != nil {
		return 0, err
	}
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	t, err := f.fenceTable(ctx, conn)
	if err != nil {
		return 0, err
	}
	var high int64
	err = conn.QueryRowContext(ctx, t.highest, resource).Scan(&high)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, f.schemaError(err)
	}
	return fence.Token(high), nil
}

// Do is New(db, opts...) followed by Do: see [Fence.Do].
func Do(ctx context.Context, db *sql.DB, resource string, token fence.Token, fn func(tx *sql.Tx) error, opts ...Option) error {
	f, err := New(db, opts...)
	if err != nil {
		return err
	}
	return f.Do(ctx, resource, token, fn)
}

// CreateTable creates the fence table if it does not exist: see
// [Fence.CreateTable].
func CreateTable(ctx context.Context, db *sql.DB, opts ...Option) error {
	f, err := New(db, opts...)
	if err != nil {
		return err
	}
	return f.CreateTable(ctx)
}
