package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
)

// The wait between Do's attempts after a refusal for a concurrent
// transaction: from retryMin, growing to retryMax (loop.BackOff, ±50 %),
// so that retrying writers do not collide again in step.
const (
	retryMin = time.Millisecond
	retryMax = 100 * time.Millisecond
)

// Do runs fn in a transaction in which resource's fence row has been
// advanced to token, and commits, or runs nothing if the row holds a larger
// token (a *fence.StaleError). A missing row is inserted; an equal token is
// accepted; a nil fn only records token, like fence.Guard.Check. fn must
// use tx only, must not commit or roll tx back and must not call Do; Do
// never calls fn twice. After an error nothing was committed unless it
// matches fence.ErrUncertain. ctx bounds the transaction up to the COMMIT,
// never the COMMIT itself, so lease.Context() is a safe ctx (see Do in the
// package documentation for the rules on fn and every error).
func (f *Fence) Do(ctx context.Context, resource string, token fence.Token, fn func(tx *sql.Tx) error) error {
	var ferr error
	var w func(tx *sql.Tx) error
	if fn != nil {
		w = func(tx *sql.Tx) error { ferr = fn(tx); return ferr }
	}
	err := f.do(ctx, resource, token, w)
	return fence.Reported(err, ferr, f.OnStale)
}

func (f *Fence) do(ctx context.Context, resource string, token fence.Token, fn func(tx *sql.Tx) error) error {
	if err := checkToken(token); err != nil {
		return err
	}
	if err := checkResource(resource); err != nil {
		return err
	}
	var busy error           // the last attempt's refusal for a concurrent transaction
	var wait backoff.BackOff // made at the first refusal
	for {
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
		if wait == nil {
			wait = loop.BackOff(retryMin, retryMax)
		}
		if loop.Pause(ctx, wait, retryMax) != nil {
			return f.waitError(ctxErr(ctx), busy)
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
func (f *Fence) try(ctx context.Context, resource string, token fence.Token, fn func(*sql.Tx) error) (ran bool, err error) {
	t, err := f.begin(ctx)
	if err != nil {
		return false, err
	}
	defer t.end() // also when fn panics
	if err := f.advanceRow(ctx, t.tx, t.table, resource, token); err != nil {
		return false, err
	}
	if fn != nil {
		ran = true
		if err := fn(t.tx); err != nil {
			return true, err
		}
	}
	return ran, f.commit(ctx, t)
}

// txn is one transaction of Do, on a connection of its own (for the SQLite
// settings and the clean-up). It is begun on a context that ctx does not
// cancel, so that database/sql and the driver never interrupt the COMMIT: a
// watcher cancels it when ctx ends before the COMMIT is sent (BEGIN and
// every statement are cut short, and database/sql rolls the transaction
// back), and once the COMMIT is sent its outcome is the server's alone.
type txn struct {
	conn       *sql.Conn
	table      *table // the fence table, checked on conn before the BEGIN
	tx         *sql.Tx
	abort      context.CancelFunc // cancels the transaction's context
	stop       func() bool        // stops the watcher
	state      atomic.Int32       // txOpen, then txAborted (by the watcher) or txCommitting
	committing bool               // the commit's goroutine owns conn and tx
}

// The states of a txn.
const (
	txOpen int32 = iota
	txAborted
	txCommitting
)

// begin takes a connection and begins a txn on it.
func (f *Fence) begin(ctx context.Context) (*txn, error) {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if f.d == SQLite && f.busy > 0 {
		if err := f.ensureBusyTimeout(ctx, conn); err != nil {
			conn.Close()
			return nil, err
		}
	}
	// Outside the transaction, so that on SQLite its first statement is
	// still the fence statement, a write (see the package documentation).
	table, err := f.fenceTable(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	t := &txn{conn: conn, table: table}
	// ctx's values, cancelled by the watcher only while the COMMIT is not
	// sent (database/sql then rolls back).
	txCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	t.abort = abort
	t.stop = context.AfterFunc(ctx, func() {
		if t.state.CompareAndSwap(txOpen, txAborted) {
			abort()
		}
	})
	if t.tx, err = conn.BeginTx(txCtx, f.txOpts); err != nil {
		t.end()
		return nil, err
	}
	return t, nil
}

// end rolls t back and returns its connection to the pool, unless the
// commit's goroutine owns them.
func (t *txn) end() {
	if !t.committing {
		if t.tx != nil {
			t.tx.Rollback() // ErrTxDone if ctx's end or the commit did it
		}
		t.abort()
	}
	t.stop()
	if !t.committing {
		t.conn.Close()
	}
}

// advanceRow runs the fence statement in tx: resource's row goes to token,
// or a *fence.StaleError says which larger token it holds.
func (f *Fence) advanceRow(ctx context.Context, tx *sql.Tx, t *table, resource string, token fence.Token) error {
	res, err := tx.ExecContext(ctx, t.advance, resource, int64(token))
	if err != nil {
		return f.schemaError(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		var high int64
		if err := tx.QueryRowContext(ctx, t.highest, resource).Scan(&high); err != nil {
			return fmt.Errorf("fencesql: %s is stale, reading the highest token: %w", token, err)
		}
		return &fence.StaleError{Resource: resource, Token: token, Highest: fence.Token(high)}
	}
	return nil
}

// commit sends t's COMMIT unless ctx has ended (then t is rolled back). If
// ctx ends while the COMMIT is in flight, commit stops waiting and says the
// outcome is uncertain; the COMMIT goes on in its goroutine, which returns
// the connection to the pool when it is answered.
func (f *Fence) commit(ctx context.Context, t *txn) error {
	// ctx.Err first: the watcher runs in a goroutine of its own, maybe not yet.
	if ctx.Err() != nil || !t.state.CompareAndSwap(txOpen, txCommitting) {
		return fmt.Errorf("fencesql: not committed, rolled back: %w", ctxErr(ctx))
	}
	t.committing = true
	done := make(chan error, 1)
	go func() {
		defer t.conn.Close()
		defer t.abort()
		err := t.tx.Commit()
		if err != nil {
			err = f.commitError(t.conn, err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done: // answered meanwhile: the answer is certain
			return err
		default:
		}
		return fmt.Errorf("%w: the context ended while the commit was in flight (it goes on without us): %w", fence.ErrUncertain, ctxErr(ctx))
	}
}

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
