package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lease is one grant: the advisory lock held by the session of conn.
//
// Its monitor goroutine owns conn until it returns (done): it listens on the
// connection between pings, so that a session the server ends (an
// administrator, a restart) is seen at once, and pings every s.ping. The
// lease context ends with recipe.ErrSuspended when no ping was answered
// within s.loss of its send time, with recipe.ErrSessionLost when the
// connection fails, and then the monitor hangs up. After Release ended the
// context, the monitor leaves conn to Release, which unlocks and hangs up.
type lease struct {
	m      *Mutex
	conn   *pgconn.PgConn
	token  fence.Token
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the monitor has returned

	relMu    sync.Mutex // serializes Release
	released bool       // the unlock was attempted: nothing more to do
}

var _ recipe.Lease = (*lease)(nil)

func newLease(ctx context.Context, m *Mutex, conn *pgconn.PgConn, tok fence.Token) *lease {
	l := &lease{m: m, conn: conn, token: tok, done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	return l
}

// Token implements recipe.Lease: the lock's token counter right after the
// grant. It is larger than every earlier grant's token of the same lock key
// in the same database.
func (l *lease) Token() fence.Token { return l.token }

// Context implements recipe.Lease. It carries the values of Acquire's
// context and ends with recipe.ErrReleased (Release), recipe.ErrSuspended
// (no ping answered within TTL/2 of its send time), recipe.ErrSessionLost
// (the connection failed or the server ended the session) or
// recipe.ErrSessionClosed (Session.Close).
func (l *lease) Context() context.Context { return l.ctx }

// monitor watches the lease until its context ends; lastAck is the send time
// of the last statement the server answered (the token bump).
func (l *lease) monitor(lastAck time.Time) {
	defer close(l.done)
	s := l.m.s
	suspended := fmt.Errorf("%w: pglock: no ping answered within %v of its sending", recipe.ErrSuspended, s.loss)
	expire := time.AfterFunc(time.Until(lastAck.Add(s.loss)), func() { l.cancel(suspended) })
	defer expire.Stop()
	for {
		if err := l.listen(time.Now().Add(s.ping)); err != nil {
			l.cancel(fmt.Errorf("%w: pglock: %w", recipe.ErrSessionLost, err))
			break
		}
		if l.ctx.Err() != nil {
			break
		}
		// Release never interrupts a ping (that would break the
		// connection it needs to unlock); Close and the deadline do.
		sent := time.Now()
		pctx, cancel := context.WithDeadline(s.ctx, lastAck.Add(s.loss))
		err := l.conn.Ping(pctx)
		late := pctx.Err() != nil
		cancel()
		if err != nil {
			switch {
			case s.ctx.Err() != nil:
				l.cancel(recipe.ErrSessionClosed)
			case late:
				l.cancel(suspended)
			default:
				l.cancel(fmt.Errorf("%w: pglock: ping: %w", recipe.ErrSessionLost, err))
			}
			break
		}
		if l.ctx.Err() != nil {
			break
		}
		lastAck = sent
		expire.Reset(time.Until(sent.Add(s.loss)))
	}
	cause := context.Cause(l.ctx)
	if errors.Is(cause, recipe.ErrReleased) {
		return // Release unlocks
	}
	hangUp(l.conn)
	if !errors.Is(cause, recipe.ErrSessionClosed) {
		s.log.Warn("pglock: lease lost", "lock", l.m.name, "token", l.token, "cause", cause)
	}
}

// listen reads from the idle connection until deadline or the lease context
// ends, which is not an error. An error means the connection failed or the
// server ended the session.
func (l *lease) listen(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(l.ctx, deadline)
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
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released {
		return nil
	}
	l.cancel(recipe.ErrReleased)
	<-l.done
	if cause := context.Cause(l.ctx); !errors.Is(cause, recipe.ErrReleased) {
		return fmt.Errorf("%w: %w", recipe.ErrLeaseLost, cause)
	}
	l.released = true
	// The unlock is bounded by the cleanup budget even when ctx has no
	// deadline: a cut or frozen server must not hold Release (and a
	// leader.Run stopping) for ever. Closing the connection below frees the
	// lock anyway, at once on a clean close, else by the server's bound.
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, l.m.s.loss)
	defer cancel()
	rows, err := query(ctx, l.conn, "SELECT pg_advisory_unlock($1::bigint)", strconv.FormatInt(l.m.key, 10))
	hangUp(l.conn)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		return &recipe.OpError{Op: "pg_advisory_unlock", Path: l.m.name, Err: err}
	case len(rows) != 1 || string(rows[0][0]) != "t":
		// Not held by this session although it is alive: impossible
		// unless someone ran pg_advisory_unlock_all on it.
		return fmt.Errorf("%w: pglock: the session did not hold the lock at unlock", recipe.ErrLeaseLost)
	}
	l.m.s.log.Debug("pglock: released", "lock", l.m.name, "token", l.token)
	return nil
}
