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
