package pglock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant: the advisory lock held by the session of conn.
//
// Its monitor goroutine owns conn until it returns (done): it listens on the
// connection between pings, so that a session the server ends (an
// administrator, a restart) is seen at once, and pings every s.ping. The
// lease context ends with recipe.ErrSuspended when its Deadline passes
// (s.loss after the send time of the last ping answered), with
// recipe.ErrSessionLost when the connection fails, with
// recipe.ErrSessionClosed on Session.Close, and then the monitor hangs up.
// After Release ended the context, the monitor leaves conn to Release, which
// unlocks and hangs up.
type lease struct {
	grant.Core
	m    *Mutex
	conn *lockConn
	done chan struct{} // closed when the monitor has returned
}

var _ recipe.Lease = (*lease)(nil)

// newLease makes the lease of the grant c holds, with record rec, and
// starts its monitor, whose deadline starts at rec.sent; the caller has
// entered the monitor in the Session's operations (life.Enter), and the
// monitor exits. The lease keeps ctx's values, not its cancellation.
func newLease(ctx context.Context, m *Mutex, c *lockConn, rec record) *lease {
	l := &lease{m: m, conn: c, done: make(chan struct{})}
	l.Init(ctx, rec.tok, m.rep)
	l.SetDelayServed(rec.served)
	go l.monitor(rec.sent)
	return l
}

// monitor watches the lease until its context ends, as an operation of
// the Session's (grant entered it); sent is the send time of the last
// statement the server answered.
func (l *lease) monitor(sent time.Time) {
	s := l.m.s
	defer s.life.Exit()
	defer close(l.done)
	suspended := fmt.Errorf("%w: pglock: no ping answered within %v of its sending", recipe.ErrSuspended, s.loss)
	d := grant.NewDeadline(sent, s.loss, func() { l.End(suspended) })
	defer d.Stop()
	// The monitor ends the lease on Close itself, so that the loss is
	// reported before Close returns.
	ctx, closed := l.Context(), s.life.Context()
	wake, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(closed, stop)()
	for ctx.Err() == nil {
		if err := l.listen(wake, time.Now().Add(s.ping)); err != nil {
			l.End(fmt.Errorf("%w: pglock: %w", recipe.ErrSessionLost, err))
			break
		}
		if closed.Err() != nil {
			l.End(recipe.ErrSessionClosed)
		}
		if ctx.Err() != nil {
			break
		}
		// Release never interrupts a ping (that would break the
		// connection it needs to unlock); Close and the deadline do.
		sent := time.Now()
		pctx, cancel := context.WithDeadline(closed, d.At())
		err := l.conn.Ping(pctx)
		late := pctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			d.Ack(sent)
		case closed.Err() != nil:
			l.End(recipe.ErrSessionClosed)
		case late:
			l.End(suspended)
		default:
			l.End(fmt.Errorf("%w: pglock: ping: %w", recipe.ErrSessionLost, err))
		}
	}
	// Ended by this monitor or by another goroutine, whose End sets the
	// cause a moment after Live turns false: wait for it.
	<-ctx.Done()
	if context.Cause(ctx) != recipe.ErrReleased {
		l.conn.hangUp() // Release unlocks and hangs up otherwise
	}
}

// listen reads from the idle connection until deadline or ctx ends, which
// is not an error. An error means the connection failed or the server ended
// the session.
func (l *lease) listen(ctx context.Context, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := l.conn.WaitForNotification(ctx)
	if ctx.Err() != nil {
		return nil // a timeout leaves the connection usable
	}
	return err // nil: a notification, which nobody asked for
}

// Release implements recipe.Lease. It ends the context (recipe.ErrReleased),
// waits for a ping in flight (at most TTL/2), then unlocks on the lease's
// connection, which confirms the lock is free when Release returns, and
// closes the connection. The unlock is bounded by TTL/2 whatever ctx says
// (a context of its own if ctx is already done), so a cut or frozen server
// never holds Release longer than TTL/2 plus the ping in flight.
//
// Errors: recipe.ErrLeaseLost wrapping the cause if the lease had ended
// before (the monitor has already closed the connection: nothing to undo);
// a *recipe.OpError if the unlock failed, after which the connection is
// closed anyway and the server frees the lock when it sees that (at once on
// a working network, within the TTL otherwise). Concurrent calls are
// serialized; once the unlock was attempted, later calls return nil.
func (l *lease) Release(ctx context.Context) error {
	return l.Core.Release(ctx, func() {
		l.End(recipe.ErrReleased)
		<-l.done
	}, l.unlock)
}

// unlock is Release's removal: pg_advisory_unlock (after clearing the
// grant's records in the same statement: releaseSQL), then hang up. It reports
// done even when the unlock failed: the connection is closed either way, so
// nothing is left to remove.
func (l *lease) unlock(ctx context.Context) (done bool, err error) {
	// Bounded by the cleanup budget even when ctx has no deadline: a cut or
	// frozen server must not hold Release (and a leader.Run stopping) for
	// ever. Closing the connection frees the lock anyway, at once on a clean
	// close, else by the server's bound.
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, l.m.s.loss)
	defer cancel()
	sql, args := "SELECT pg_catalog.pg_advisory_unlock($1::pg_catalog.int8)", []string{strconv.FormatInt(l.m.key, 10)}
	if delay, holder := l.m.delay > 0, l.m.s.holderErr == nil; delay || holder {
		// a clean end: clear the grant's records first (delay.go)
		sql, args = releaseSQL(l.m.s.table, delay, holder), append(args, strconv.FormatUint(uint64(l.Token()), 10))
	}
	rows, err := query(ctx, l.conn.PgConn, sql, args...)

	l.conn.hangUp()
	switch {
	case err != nil:
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		return true, &recipe.OpError{Op: "pg_advisory_unlock", Path: l.m.name, Err: err}
	case len(rows) != 1 || string(rows[0][0]) != "t":
		// Not held by this session although it is alive: impossible
		// unless someone ran pg_advisory_unlock_all on it.
		return true, fmt.Errorf("%w: pglock: the session did not hold the lock at unlock", recipe.ErrLeaseLost)
	}
	l.m.s.log.Debug("pglock: released", "lock", l.m.name, "token", l.Token())
	return true, nil
}
