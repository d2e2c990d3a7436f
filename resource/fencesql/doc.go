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
// is refused (fence.ErrNoToken), and so is one above fence.MaxToken
// (ErrTokenRange); bad input gets a typed error before any statement is
// sent. When the lock moves to another backend (a new fence.Era), raise
// both shapes to the era's floor: [Fence.RaiseFloor] for fence rows,
// [Fence.RaiseColumnFloor] for a table's fence column.
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
// # The fence table
//
// Whoever can write the fence table can lower its tokens, and a stale
// holder's write then lands. Before its first use (CreateTable, Do,
// Highest) a Fence checks the table and refuses one that others could
// write or that stands in for the intended one with ErrUntrustedTable:
// on PostgreSQL through internal/pgtrust (owner and schema owner trusted,
// no write privileges for others, no triggers, rules or policies, a bare
// name found in current_schema(); WithTrustedRoles names more trusted
// roles), on SQLite what can be seen cheaply (a view, triggers, a temp or
// attached table shadowing main's, files others can write). From then on
// the table is named with its schema. docs/fencing.md says what each
// database protects.
//
// In full, [ErrUntrustedTable] is matched by the error for a fence table
// that is not safe to keep tokens in. PostgreSQL: it is owned, or its
// schema is, by a role other than the connecting one, a superuser or one
// named by WithTrustedRoles; another role (or PUBLIC) holds a privilege
// that allows writes on it or on a column; it has triggers, rules, row
// security or policies; it is not an ordinary permanent table; or its bare
// name resolves through search_path to a schema other than
// current_schema(). SQLite: it is a view, has triggers, or its bare name
// resolves to a schema other than main (temp, an attached database); or
// the database file, its directory or its -wal, -shm or -journal file is
// writable by others (see docs/fencing.md). The message names the table
// and the rule.
//
// # Do
//
// In [Fence.Do] (and [Do]), fn must use tx only (statements elsewhere
// are unfenced and may wait for the transaction), must not commit or roll tx back, and must not call Do:
// on PostgreSQL a nested Do on the same resource waits for its own row
// lock; on SQLite the transaction holds the database's write lock, so any
// write from fn not through tx waits on itself and fails (after the busy
// timeout with ErrConflict, or for a nested Do when its ctx ends), with an
// error that says so. Do never calls fn twice. If fn panics, the
// transaction is rolled back, the connection returned to the pool, and the
// panic propagates.
//
// Errors, after which nothing was committed unless the error matches
// fence.ErrUncertain:
//   - a *fence.StaleError (fence.ErrStale) with the highest accepted token
//     when token is lower; fn was not called;
//   - fence.ErrNoToken, ErrTokenRange or ErrBadResource for bad input,
//     before any statement;
//   - a *SchemaError (ErrNoTable) naming the DDL when the fence table does
//     not exist;
//   - ErrUntrustedTable, naming the table and the rule, when the fence
//     table is one that others could write or that stands in for the
//     intended one (checked at the first use; fn was not called);
//   - fn's error, as it returned it (wrapped with ErrConflict too if the
//     database refused a statement for a concurrent transaction);
//   - ctx's error if ctx ended before the COMMIT was sent (the
//     transaction is rolled back, even if fn returned nil);
//   - ErrConflict for a serialization failure or busy database at commit;
//   - fence.ErrUncertain, wrapping the driver's error, when the commit's
//     answer was lost (a broken connection): it may have been applied;
//   - fence.ErrUncertain and ctx's error together when ctx ended while the
//     COMMIT was in flight: Do returns at once, and the COMMIT goes on in a
//     goroutine that returns the connection to the pool when answered;
//   - otherwise the driver's error.
//
// ctx bounds the transaction up to the COMMIT, never the COMMIT itself (an
// interrupted COMMIT may still land, and the caller could not tell), so
// lease.Context() is a safe ctx: ownership in doubt never turns a landed
// write into an error that says nothing landed.
//
// # Update
//
// [Fence.Update] runs, on q,
//
//	UPDATE <Table> SET <set>, <Fence> = token
//	 WHERE <Key> = <ID> AND COALESCE(<Fence>, 0) <= token
//
// (on PostgreSQL with the operators and the token's type written as
// pg_catalog's, below)
//
// The table, key and fence names are quoted by the dialect's rules (on
// PostgreSQL after folding to lower case, as unquoted names are), so a
// keyword (order, user) or a function's name (current_user) is a column.
// On PostgreSQL Update's own operators are pg_catalog's, whatever
// search_path holds (written OPERATOR(pg_catalog.=) and
// OPERATOR(pg_catalog.<=), token cast to pg_catalog.int8), so that no role
// that can create objects in a schema of search_path can plant one that
// runs as the caller: the key column must be of a type whose = is
// pg_catalog's (the built-in types, their domains, enums and arrays); a
// key of an extension's type compares as its implicit cast to a built-in
// type does (citext as text: case-sensitively) or fails with the
// database's "operator does not exist". set is resolved with the caller's
// search_path: qualify what it calls if others can create in a schema of
// it.
//
// set is the caller's assignments with the dialect's placeholders for args,
// numbered from 1: "balance = $1, note = $2" on PostgreSQL, "balance = ?,
// note = ?" (or ?1, ?2, or :name with sql.Named) on SQLite. Update appends
// its own placeholders after them, so set must use exactly 1 to len(args):
// a placeholder beyond len(args) would bind the token or the key into the
// caller's column. Update counts them first and refuses any other count
// with ErrPlaceholders; so that the count is the database's whatever its
// version and settings, set may hold no comment, backslash, dollar quote,
// semicolon, unbalanced parenthesis or placeholder touching a name (a$1,
// $1_0, SQLite's $a(x)); strings '…' and quoted identifiers "…" (SQLite
// also […] and `…`) are fine, placeholder-like text inside them is not
// counted. Pass any value that needs what is refused in args. Never build
// set from untrusted input: it is SQL.
//
// The check and the write are one statement; see Isolation above. When no row changed, Update reads the row's fence to say
// why: a *fence.StaleError (fence.ErrStale) with the row's token when it is
// larger, ErrNoRow when there is no such row. Other errors:
// fence.ErrNoToken, ErrTokenRange, ErrBadName, ErrPlaceholders before any
// statement; a *SchemaError (ErrNoTable, ErrNoColumn) when the table or a column is missing (for the fence column,
// with the ALTER TABLE that adds it); ErrConflict (wrapping the driver's
// error) when the database refused the statement for a concurrent
// transaction, in which case nothing was written but a transaction q may be
// aborted; otherwise the driver's error.
//
// # Raising a column's floor
//
// [Fence.RaiseColumnFloor] is RaiseFloor for the fence columns that Update
// checks: it runs, on q, the one statement
//
//	UPDATE <table> SET <fenceColumn> = floor
//	 WHERE COALESCE(<fenceColumn>, 0) < floor
//
// which raises the fence of every row of table that is below floor to
// floor, so that every later Update with a token below floor is refused
// (fence.ErrStale) on each of them; rows already above floor keep their
// fence, none is ever lowered. It returns how many rows it raised. An
// empty fenceColumn is DefaultFenceColumn. Names are quoted, and on
// PostgreSQL the operators and floor's type written as pg_catalog's, as
// in Update; on SQLite a *sql.DB's or *sql.Conn's connection without a
// busy timeout gets the Fence's, as in Update. It is the operator's step
// of a switch of lock backend for a table fenced with Update: raise it
// to the new era's Floor (docs/backends.md#switching-backends).
//
// The statement is atomic with every Update: on PostgreSQL an old-era
// Update that commits first is raised over, one that comes later waits
// for the raise's row lock and then finds the floor (also under READ
// COMMITTED, where the WHERE is checked again on the row's newest
// version); on SQLite the two take the database's write lock in turn. The
// raise holds the row locks of every row it raises until the statement
// (or q's transaction) ends: on a large table run it when writes are few.
// It covers the rows that exist when it runs: a row inserted later has
// the fence its INSERT gives it, and the default 0 accepts any token, so
// insert rows with the inserting holder's token (or the era's floor) in
// the fence column.
//
// Errors: fence.ErrNoToken, ErrTokenRange (a floor above fence.MaxToken,
// matching fence.ErrTokenOverflow as every fence's refusal does), a
// *fence.RangeError (fence.ErrTokenOverflow) for a floor above
// fence.MaxFloor, which no era reaches, or ErrBadName before any
// statement; a *SchemaError (ErrNoTable, ErrNoColumn with the ALTER TABLE
// that adds the fence column) when the
// table or the column is missing; ErrConflict when the database refused
// the statement for a concurrent transaction; otherwise the driver's
// error. The statement is idempotent: after any error, run it again.
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
