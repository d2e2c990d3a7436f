// Package fencesql fences writes to a SQL database: a write carrying a
// fencing token lower than one the database has already accepted for the
// same resource is refused by the database itself, atomically with the
// write. It works through database/sql and imports no driver; PostgreSQL
// and SQLite are supported, chosen by WithDialect or detected from the
// driver.
//
// Two shapes, both one atomic step at the database:
//
//   - A fence row per resource ([Fence.Do], [Do]): a table (default
//     zkrecipes_fence; [CreateTable] makes it) maps a resource name to the
//     highest token accepted. Do opens a transaction, advances the
//     resource's row to the token unless it holds a larger one, runs the
//     caller's function with the transaction, and commits. Everything the
//     function writes through the transaction lands only with the token,
//     and concurrent callers serialise on the fence row.
//   - A fence column on the caller's own rows ([Fence.Update], [Update]):
//     UPDATE … SET …, fence = token WHERE key = id AND fence <= token, with
//     "no row changed" told apart: fence.ErrStale if the row holds a larger
//     token, ErrNoRow if there is no such row.
//
// Equal tokens are accepted (the same holder writing again); the zero token
// is refused (fence.ErrNoToken); bad input gets a typed error before any
// statement is sent.
//
// # Isolation
//
// PostgreSQL, READ COMMITTED (its default) and READ UNCOMMITTED (the same
// there): correct. The fence statement is an INSERT … ON CONFLICT DO UPDATE
// … WHERE stored <= new; it locks the fence row, and a writer that had to
// wait for that lock evaluates the WHERE again on the row as the previous
// writer committed it, so it compares its token with the newest one. The
// caller's function runs after the lock is held, so its statements see
// every write committed under an earlier token. The fence column's UPDATE
// behaves the same way.
//
// PostgreSQL, REPEATABLE READ and SERIALIZABLE (WithIsolation): correct,
// and a fence statement that meets a concurrent writer's commit fails with
// a serialization failure instead of waiting and re-checking. Do then
// retries it in a new transaction, with a short backoff, until ctx ends (the
// function has not run, nothing was written). A serialization failure after
// the function has run (in its statements or at commit) is returned
// matching ErrConflict: nothing was committed and calling Do again is safe.
// Update never retries (it may run in the caller's transaction): it returns
// ErrConflict. Under contention these levels cost: the retries make Do
// several times slower on one resource (docs/fencing.md has figures).
// Other levels are refused by New (ErrIsolation).
//
// At any level, functions that lock rows in opposite orders can deadlock;
// PostgreSQL aborts one transaction (SQLSTATE 40P01), whose Do returns
// ErrConflict with nothing committed.
//
// SQLite: every transaction is serializable whatever level is asked for.
// The fence statement is the transaction's first statement and a write, so
// it takes the database's write lock, held until commit: all Do calls on one
// database run one at a time, whatever their resource. A connection of
// database/sql's pool that meets the lock held elsewhere gets SQLITE_BUSY
// at once unless it has a busy timeout; Do therefore gives a connection
// whose busy timeout is 0 (modernc.org/sqlite's default) the one of
// WithBusyTimeout (DefaultBusyTimeout), so that the fence statement and the
// commit wait for the lock, and retries a fence statement refused as busy
// anyway until ctx ends. WAL mode (_pragma=journal_mode(WAL) for modernc)
// lets readers run beside the writer; in the default rollback-journal mode
// a commit also waits for readers to finish. Any other write to the
// database from inside the function, not through its transaction, waits on
// that transaction (see Fence.Do). With ":memory:", each connection of the
// pool is a database of its own: use a file.
//
// # What it does not protect
//
// Only what is written through the transaction (or by the fenced UPDATE)
// is fenced. Writes the function makes elsewhere (another connection, a
// file, an HTTP call, an email) are not: they may happen for a call that
// is then refused or rolled back, and again when the call is retried. Give
// such effects an idempotency key and record it in the same transaction.
// If the database is restored from a backup, its high-water marks go back
// with it.
package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
}

// WithDialect sets the dialect instead of detecting it from the driver:
// for a PostgreSQL or SQLite driver this package does not know.
func WithDialect(d Dialect) Option { return func(c *config) { c.dialect = d } }

// WithTable sets the fence table's name (default DefaultTable): a plain
// identifier, optionally schema-qualified ("app.fence").
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
	advance string // the fence statement
	highest string
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
	f := &Fence{db: db, d: c.dialect, table: c.table, busy: max(c.busy, 0),
		advance: c.dialect.advance(c.table), highest: c.dialect.highest(c.table)}
	if c.iso != sql.LevelDefault {
		f.txOpts = &sql.TxOptions{Isolation: c.iso}
	}
	return f, nil
}

// Dialect returns the dialect in use.
func (f *Fence) Dialect() Dialect { return f.d }

// DDL returns the statement that creates the fence table if it does not
// exist.
func (f *Fence) DDL() string { return f.d.ddl(f.table) }

// CreateTable creates the fence table if it does not exist (DDL).
func (f *Fence) CreateTable(ctx context.Context) error {
	_, err := f.db.ExecContext(ctx, f.DDL())
	return err
}

// Do runs fn in a transaction in which resource's fence row has been
// advanced to token, and commits, or runs nothing if the row holds a larger
// token. A missing row is inserted; an equal token is accepted. fn may be
// nil: Do then only records token, like fence.Guard.Check.
//
// fn must use tx only: statements on db or another connection run outside
// the transaction, unfenced, and may wait for it. It must not commit or
// roll tx back, and must not call Do: on PostgreSQL a Do on the same
// resource waits for its own row lock; on SQLite, where the transaction
// holds the database's write lock from the fence statement on, any write
// to the database from inside fn that is not through tx (a Do on any
// resource, an Exec on db) waits on itself: it fails after the busy
// timeout with ErrConflict (a statement fn returns the error of), or, for
// a nested Do, which retries a busy fence statement, when its ctx ends;
// both errors say so. (Do cannot tell a nested call from a concurrent one:
// fn gets no context, and goroutines share contexts.) fn may run more
// than once only if it returned and the transaction then failed and the
// caller calls Do again: Do itself never calls it twice. If fn panics, the
// panic propagates out of Do after the transaction is rolled back (the
// token is not advanced, nothing fn wrote is committed) and the connection
// is returned to the pool.
//
// Errors, after which nothing was committed unless the error matches
// fence.ErrUncertain:
//   - a *fence.StaleError (fence.ErrStale) with the highest accepted token
//     when token is lower; fn was not called;
//   - fence.ErrNoToken, ErrTokenRange or ErrBadResource for bad input,
//     before any statement;
//   - a *SchemaError (ErrNoTable) naming the DDL when the fence table does
//     not exist;
//   - fn's error, as it returned it (wrapped with ErrConflict too if the
//     database refused a statement for a concurrent transaction);
//   - ctx's error if ctx ended before the COMMIT was sent (the
//     transaction is rolled back, even if fn returned nil);
//   - ErrConflict for a serialization failure or busy database at commit;
//   - fence.ErrUncertain, wrapping the driver's error, when the commit's
//     answer was lost (a broken connection): it may have been applied;
//   - fence.ErrUncertain and ctx's error together when ctx ended while the
//     COMMIT was in flight (see below);
//   - otherwise the driver's error.
//
// ctx bounds the transaction up to the COMMIT and never cancels the COMMIT
// itself: a COMMIT interrupted by a cancel request may still land, and the
// caller could not tell. The transaction is therefore not bound to ctx (as
// database/sql's BeginTx would bind it): a watcher rolls it back if ctx
// ends before the COMMIT is sent; once it is sent, the server alone decides.
// If ctx ends before the COMMIT's answer arrives, Do returns at once with an
// error matching both fence.ErrUncertain and ctx's error; the COMMIT goes on
// in a goroutine, which returns the connection to the pool when it is
// answered. Passing lease.Context() as ctx is therefore safe: it ends when
// ownership is in doubt, and that never turns a landed write into an error
// that says nothing landed.
func (f *Fence) Do(ctx context.Context, resource string, token fence.Token, fn func(tx *sql.Tx) error) error {
	if err := checkToken(token); err != nil {
		return err
	}
	if err := checkResource(resource); err != nil {
		return err
	}
	var busy error // the last attempt's refusal for a concurrent transaction
	for attempt := 0; ; attempt++ {
		ran, err := f.try(ctx, resource, token, fn)
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) && !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrUncertain) {
			// The transaction is rolled back as soon as ctx ends, so a
			// statement then fails with sql.ErrTxDone: say why.
			err = fmt.Errorf("fencesql: not committed, rolled back: %w (%w)", ctxErr(ctx), err)
		}
		if err != nil && !ran && busy != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return f.waitError(err, busy) // ended while waiting for the lock again
		}
		if err == nil || !f.d.retryable(err) {
			return err
		}
		if ran && f.d == SQLite && !errors.Is(err, errSelfWait) {
			return fmt.Errorf("%w: %w (%w)", ErrConflict, err, errSelfWait)
		}
		if ran {
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
		// Refused for a concurrent transaction before fn ran: nothing was
		// written, so the fence statement can be tried again.
		busy = err
		if werr := sleep(ctx, attempt); werr != nil {
			return f.waitError(werr, busy)
		}
	}
}

// waitError is Do's error when ctx ended (err) while it kept finding the
// fence row or database locked (busy, the last refusal).
func (f *Fence) waitError(err, busy error) error {
	if f.d == SQLite {
		return fmt.Errorf("fencesql: %w waiting for the database's write lock (last attempt: %w); %w", err, busy, errSelfWait)
	}
	return fmt.Errorf("fencesql: %w (last attempt: %w)", err, busy)
}

// errSelfWait explains a busy SQLite database to a caller of Do, who most
// likely wrote outside tx from inside fn.
var errSelfWait = errors.New("on SQLite a Do holds the database's write lock from its fence statement to its commit, " +
	"so a write made inside fn outside its tx (on the *sql.DB, another connection, a nested Do on any resource) waits on itself: write through tx only")

// try is one transaction of Do. ran reports whether fn was called.
//
// The transaction is begun on a context that ctx does not cancel, so that
// database/sql and the driver never interrupt the COMMIT: a watcher
// cancels it when ctx ends before the COMMIT is sent (BEGIN and every
// statement are cut short, and database/sql rolls the transaction back),
// and once the COMMIT is sent its outcome is the server's alone. If ctx ends while the COMMIT is in flight, try stops waiting and
// says the outcome is uncertain; the COMMIT goes on in its goroutine,
// which returns the connection to the pool when it is answered.
func (f *Fence) try(ctx context.Context, resource string, token fence.Token, fn func(*sql.Tx) error) (ran bool, err error) {
	conn, err := f.db.Conn(ctx) // one connection for the SQLite settings and the clean-up below
	if err != nil {
		return false, err
	}
	committing := false // the commit's goroutine owns conn
	defer func() {
		if !committing {
			conn.Close()
		}
	}()
	if f.d == SQLite && f.busy > 0 {
		if err := f.ensureBusyTimeout(ctx, conn); err != nil {
			return false, err
		}
	}
	// The transaction's context: ctx's values, cancelled by the watcher
	// only while the COMMIT is not sent (database/sql then rolls back).
	txCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	var state atomic.Int32 // txOpen, then txAborted (by the watcher) or txCommitting
	stop := context.AfterFunc(ctx, func() {
		if state.CompareAndSwap(txOpen, txAborted) {
			abort()
		}
	})
	defer stop()
	defer func() {
		if !committing {
			abort()
		}
	}()
	tx, err := conn.BeginTx(txCtx, f.txOpts)
	if err != nil {
		return false, err
	}
	defer func() {
		if !committing {
			tx.Rollback() // also when fn panics; ErrTxDone if ctx's end did it
		}
	}()

	res, err := tx.ExecContext(ctx, f.advance, resource, int64(token))
	if err != nil {
		return false, f.schemaError(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 0 {
		var high int64
		if err := tx.QueryRowContext(ctx, f.highest, resource).Scan(&high); err != nil {
			return false, fmt.Errorf("fencesql: %s is stale, reading the highest token: %w", token, err)
		}
		return false, &fence.StaleError{Resource: resource, Token: token, Highest: fence.Token(high)}
	}
	if fn != nil {
		ran = true
		if err := fn(tx); err != nil {
			return true, err
		}
	}
	// ctx.Err first: the watcher runs in a goroutine of its own, maybe not yet.
	if ctx.Err() != nil || !state.CompareAndSwap(txOpen, txCommitting) {
		return ran, fmt.Errorf("fencesql: not committed, rolled back: %w", ctxErr(ctx))
	}
	committing = true
	done := make(chan error, 1)
	go func() {
		defer conn.Close()
		defer abort()
		err := tx.Commit()
		if err != nil {
			err = f.commitError(conn, err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return ran, err
	case <-ctx.Done():
		select {
		case err := <-done: // answered meanwhile: the answer is certain
			return ran, err
		default:
		}
		return ran, fmt.Errorf("%w: the context ended while the commit was in flight (it goes on without us): %w", fence.ErrUncertain, ctxErr(ctx))
	}
}

// The states of try's transaction.
const (
	txOpen int32 = iota
	txAborted
	txCommitting
)

// ctxErr is ctx's error, with its cause when that says more (a lease's
// context gives recipe.ErrSessionLost, say).
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

// commitError classifies a failed commit: definitely not applied (a
// refusal by the server, SQLite) or uncertain.
func (f *Fence) commitError(conn *sql.Conn, err error) error {
	if f.d == SQLite {
		// A COMMIT refused as busy leaves SQLite's transaction open, and
		// not every driver ends it: end it, so the connection goes back to
		// the pool clean and the outcome is certain.
		conn.ExecContext(context.Background(), "ROLLBACK")
		return err
	}
	if sqlState(err) != "" || errors.Is(err, sql.ErrTxDone) {
		return err // the server refused it, or database/sql never sent it
	}
	return fmt.Errorf("%w: commit: %w", fence.ErrUncertain, err)
}

// ensureBusyTimeout gives conn the busy timeout f.busy if it has none.
func (f *Fence) ensureBusyTimeout(ctx context.Context, conn *sql.Conn) error {
	var ms int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		return fmt.Errorf("fencesql: reading the busy timeout: %w", err)
	}
	if ms > 0 {
		return nil
	}
	_, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", max(f.busy.Milliseconds(), 1)))
	return err
}

// schemaError turns a missing fence table into a *SchemaError with the DDL.
func (f *Fence) schemaError(err error) error {
	if kind, name := f.d.missing(err); kind == ErrNoTable {
		return &SchemaError{Kind: kind, Table: f.table, Name: name, DDL: f.DDL(), Err: err}
	}
	return err
}

// Highest returns the highest token accepted for resource (zero if none).
func (f *Fence) Highest(ctx context.Context, resource string) (fence.Token, error) {
	if err := checkResource(resource); err != nil {
		return 0, err
	}
	var high int64
	err := f.db.QueryRowContext(ctx, f.highest, resource).Scan(&high)
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

// sleep waits before the attempt-th retry: 1 ms doubling up to 100 ms,
// jittered so that retrying writers do not collide again in step.
func sleep(ctx context.Context, attempt int) error {
	d := time.Millisecond << min(attempt, 7)
	d = min(d, 100*time.Millisecond)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---- input checks ----

func checkToken(token fence.Token) error {
	if token.IsZero() {
		return fence.ErrNoToken
	}
	if uint64(token) > math.MaxInt64 {
		return fmt.Errorf("%w: %s", ErrTokenRange, token)
	}
	return nil
}

func checkResource(r string) error {
	switch {
	case r == "":
		return fmt.Errorf("%w: empty", ErrBadResource)
	case len(r) > MaxResourceLen:
		return fmt.Errorf("%w: %d bytes, longer than %d: %.40q…", ErrBadResource, len(r), MaxResourceLen, r)
	case !utf8.ValidString(r):
		return fmt.Errorf("%w: not valid UTF-8: %q", ErrBadResource, r)
	case strings.IndexByte(r, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte: %q", ErrBadResource, r)
	}
	return nil
}

// checkName accepts a plain identifier, optionally schema-qualified: the
// names this package writes into its statements.
func checkName(what, name string) error {
	parts := strings.Split(name, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && identifier(p)
	}
	if !ok {
		return fmt.Errorf("%w: %s %q (letters, digits and _, at most 63 bytes, not starting with a digit; one schema qualifier allowed)", ErrBadName, what, name)
	}
	return nil
}

func identifier(s string) bool {
	if s == "" || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
