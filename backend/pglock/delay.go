package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MutexOption configures a Mutex (New).
type MutexOption func(*Mutex)

// WithLockDelay sets the Mutex's lock-delay to d, with the contract of
// every backend's option (recipe.MaxLockDelay). The record is two columns
// of the lock's token row: held names the last grant made with the option
// (its bump writes it, its Release clears it in the statement that
// unlocks) and unclean_at, on the server's clock, when a contender first
// found that grant ended without a Release: the delay runs from then. New
// fails with ErrTokenTable when the token table, made by an older pglock,
// lacks the columns and the role could not add them
// (docs/lock-delay.md#lock-delay-on-postgresql).
func WithLockDelay(d time.Duration) MutexOption { return func(m *Mutex) { m.delay = d } }

// The lock-delay's statements. mark adds to the token bump of a Mutex
// with a lock-delay (its next parameter: the delay in seconds): it names
// the new grant in held and, when the row's held named the previous grant
// (no clean Release since), keeps or starts the unclean end's time
// (unclean_at), unless the delay from it is over. It returns the seconds
// since that time (NULL: nothing to serve).
func (b *bump) mark(d time.Duration) {
	const since = "pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) "
	p := b.arg(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
	b.add("held", "1", "held = t.n OPERATOR(pg_catalog.+) 1, "+
		"unclean_at = CASE WHEN t.held OPERATOR(pg_catalog.=) t.n AND "+since+
		"COALESCE(t.unclean_at, pg_catalog.now())) OPERATOR(pg_catalog.<) "+p+"::pg_catalog.float8 "+
		"THEN COALESCE(t.unclean_at, pg_catalog.now()) END",
		since+"t.unclean_at)")
}

// servedSQL ends the lock-delay the grant with token $2 served: the next
// unclean end starts a delay of its own.
func servedSQL(table string) string {
	return "UPDATE " + table + " SET unclean_at = NULL WHERE key OPERATOR(pg_catalog.=) $1::pg_catalog.int8 " +
		"AND n OPERATOR(pg_catalog.=) $2::pg_catalog.int8 RETURNING true"
}

// unmarkSQL clears the mark (held) of the grant with token $2, which
// Acquire gives up before handing it out with no delay pending (its ctx
// ended just after the bump, the session closed): no work was done under
// it, so its end is clean. drop runs it while the lock is still held, best
// effort: if it fails, the next grant serves a delay it did not need. A
// grant given up with a delay pending keeps its mark: the next serves the
// rest.
func unmarkSQL(table string) string {
	return "UPDATE " + table + " SET held = NULL WHERE key OPERATOR(pg_catalog.=) $1::pg_catalog.int8 " +
		"AND held OPERATOR(pg_catalog.=) $2::pg_catalog.int8"
}

// releaseSQL is Release's unlock for a Mutex with a lock-delay (delay)
// or a token table with the holder columns (holder): it clears held (if it
// still names the grant with token $2) and the holder's record (for a
// Mutex without the delay: if the row's token is still $2), then unlocks,
// in one statement, so one transaction: the count(*) reads the whole
// UPDATE, row lock taken, before the unlock runs, and a contender's bump
// waits for that row lock until the clear is committed. If the statement
// fails, held stays and the next grant serves a delay it did not need:
// never the reverse.
func releaseSQL(table string, delay, holder bool) string {
	var set []string
	cond := "n OPERATOR(pg_catalog.=) $2::pg_catalog.int8"
	if delay {
		set, cond = append(set, "held = NULL"), "held OPERATOR(pg_catalog.=) $2::pg_catalog.int8"
	}
	if holder {
		set = append(set, "holder = NULL, held_since = NULL, holder_lock = NULL")
	}
	return "WITH c AS (UPDATE " + table + " SET " + strings.Join(set, ", ") + " WHERE key OPERATOR(pg_catalog.=) $1::pg_catalog.int8 " +
		"AND " + cond + " RETURNING 1) " +
		"SELECT pg_catalog.pg_advisory_unlock($1::pg_catalog.int8) FROM (SELECT pg_catalog.count(*) FROM c) AS x"
}

// parseSince sets pending and left from the seconds since the unclean end
// (NULL: none), both on the server's clock, for a delay d: left is
// grant.Rest's, never longer than d (a server clock set back).
func (r *record) parseSince(col []byte, d time.Duration) error {
	if col == nil {
		return nil
	}
	secs, err := strconv.ParseFloat(string(col), 64)
	if err != nil {
		return fmt.Errorf("pglock: bad lock-delay start %q", col)
	}
	r.pending = true
	r.left = grant.Rest(d, time.Duration(secs*float64(time.Second)))
	return nil
}

// serveDelay is the lock-delay step of an acquisition (one
// grant.Serving: an Acquire makes a single attempt): it serves what
// remains of the delay rec records on the grant's connection c, then
// clears the record (servedSQL), and sets rec's sent to the send time of
// that statement (the start of the lease's deadline) and its served to
// what it waited. A TryAcquire (!wait) that finds time left is refused
// (waitAlive) and, like an Acquire whose ctx ends during the wait, leaves
// the record as it is for the grant to be given up (drop): the next
// contender serves the rest.
func (m *Mutex) serveDelay(ctx context.Context, c *lockConn, wait bool, rec *record) error {
	w := grant.NewServing(m.rep, m.delay)
	if err := m.waitAlive(ctx, c, w, wait, rec.left); err != nil {
		return m.fail(ctx, "", err)
	}
	rec.served, rec.sent = w.Served(), time.Now()
	rows, err := c.queryCancelled(ctx, servedSQL(m.s.table), strconv.FormatInt(m.key, 10), strconv.FormatUint(uint64(rec.tok), 10))
	if err == nil && len(rows) != 1 {
		err = errors.New("pglock: the token row no longer holds this grant's token")
	}
	if err != nil {
		return m.fail(ctx, "", &recipe.OpError{Op: "lock-delay served", Path: m.name, Err: err})
	}
	return nil
}

// waitAlive is w's Wait for left on the grant's connection (for a
// TryAcquire, !wait, w's Refuse: it never waits): it pings conn every ping
// interval meanwhile, so that the server does not end the idle session
// (idle_session_timeout is the TTL, and a delay can be longer), and a ping
// that fails ends the wait with recipe.ErrSessionLost. A ping in flight is
// never interrupted (that would break the connection the grant goes on
// with); each is bounded by the loss deadline.
func (m *Mutex) waitAlive(ctx context.Context, c *lockConn, w *grant.Serving, wait bool, left time.Duration) error {
	switch {
	case left <= 0:
		return nil
	case !wait:
		return w.Refuse("", left)
	}
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(m.s.ping)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			pctx, cancel := context.WithTimeout(context.Background(), m.s.loss)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				stop(fmt.Errorf("%w: pglock: ping while serving the lock-delay: %w", recipe.ErrSessionLost, err))
				return
			}
		}
	}()
	err := w.Wait(wctx, left)
	stop(nil)
	<-done
	return err
}

// The token table's lock-delay columns (tables made before them lack
// them: Connect adds them, see prepareColumns).
const delayColumns = "held pg_catalog.int8, unclean_at pg_catalog.timestamptz"

// optionalColumns are the token table's columns that older pglock versions
// did not make, with their types: the lock-delay's (delay.go) and the
// holder's (holder.go).
var optionalColumns = [...]struct{ name, typ string }{
	{"held", "pg_catalog.int8"}, {"unclean_at", "pg_catalog.timestamptz"},
	{"holder", "pg_catalog.text"}, {"held_since", "pg_catalog.timestamptz"}, {"holder_lock", "pg_catalog.int8"},
}

// prepareColumns checks that the token table has the optionalColumns and,
// if not (a table made by an older pglock), adds them: nullable, no
// default, so a change of the catalog only, under a lock_timeout so that a
// long transaction on the table cannot queue every token bump behind the
// ALTER. Older pglock versions run unchanged against the new columns (they
// write none of them). If the role can't add them, Connect still succeeds
// and keeps the error for New with WithLockDelay (delayErr) and for Holder
// (holderErr): grants then run the statements of the older version.
// Errors (failing Connect): the connection's, ctx's cause.
func (s *Session) prepareColumns(ctx context.Context, conn *pgconn.PgConn) error {
	has, err := s.hasColumns(ctx, conn)
	if err != nil || len(has) == len(optionalColumns) {
		return err
	}
	alter := "ALTER TABLE " + s.table
	for i, c := range optionalColumns {
		if i > 0 {
			alter += ","
		}
		alter += " ADD COLUMN IF NOT EXISTS " + c.name + " " + c.typ
	}
	_, err = query(ctx, conn, "SELECT pg_catalog.set_config('lock_timeout', '2s', false)")
	if err == nil {
		_, err = query(ctx, conn, alter)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err == nil {
		if has, err = s.hasColumns(ctx, conn); err != nil || len(has) == len(optionalColumns) {
			return err
		}
		err = errors.New("columns of those names exist with other types")
	}
	missing := func(what string, names ...string) error {
		for _, n := range names {
			if !has[n] {
				return fmt.Errorf("%w: %s lacks the columns of %s (a table made by an older pglock) "+
					"and they could not be added: %w; an administrator can add them with:\n%s;", ErrTokenTable, s.table, what, err, alter)
			}
		}
		return nil
	}
	s.delayErr = missing("WithLockDelay", "held", "unclean_at")
	s.holderErr = missing("Holder and ObserveHolder", "holder", "held_since", "holder_lock")
	return nil
}

// hasColumns returns the optionalColumns that the token table has with
// their types.
func (s *Session) hasColumns(ctx context.Context, conn *pgconn.PgConn) (map[string]bool, error) {
	sql := "SELECT attname::pg_catalog.text FROM pg_catalog.pg_attribute " +
		"WHERE attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND NOT attisdropped AND ("
	for i, c := range optionalColumns {
		if i > 0 {
			sql += " OR "
		}
		sql += "(attname OPERATOR(pg_catalog.=) '" + c.name + "'::pg_catalog.name AND atttypid OPERATOR(pg_catalog.=) '" + c.typ + "'::pg_catalog.regtype)"
	}
	rows, err := query(ctx, conn, sql+")", s.table)
	if err != nil {
		return nil, err
	}
	has := make(map[string]bool, len(rows))
	for _, r := range rows {
		has[string(r[0])] = true
	}
	return has, nil
}
