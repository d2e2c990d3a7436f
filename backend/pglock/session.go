package pglock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/internal/life"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Session connects the locks of one process to one PostgreSQL database. It
// holds no connection of its own: every Acquire opens a dedicated one, which
// the lease keeps until it ends (and Holder and ObserveHolder one each). Its methods are safe for concurrent use.
type Session struct {
	cfg       *pgconn.Config // our copy, with the session parameters of pgParams
	ttl       time.Duration
	ping      time.Duration // the holder's ping interval
	loss      time.Duration // the holder's loss deadline, from the send time of the last answered ping
	table     string        // schema-qualified and quoted, once ConnectConfig has checked it
	delayErr  error         // New's error for WithLockDelay: the table lacks its columns (delay.go)
	holderErr error         // Holder's error: the table lacks the holder columns (holder.go)
	identity  string        // WithIdentity's, recorded by every grant
	poll      time.Duration // WithPollInterval's
	limit     *limiter      // WithMaxConns's bound and the waiters beyond it
	maxConns  int
	log       *slog.Logger
	metrics   recipe.Metrics // nil: none

	life *life.Group // Acquire calls in flight and lease monitors; its context ends with Close
}

// Connect parses url (postgres://user@host:5432/db?sslmode=..., or any
// connection string pgconn.ParseConfig accepts, environment variables
// included) and calls ConnectConfig. A string that can't be parsed gives an
// error matching ErrBadURL. No error shows a password, wherever it was
// given (the URL, a keyword/value string, PGPASSWORD, the password file).
func Connect(ctx context.Context, url string, opts ...Option) (*Session, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, badURL(url, err)
	}
	s, err := ConnectConfig(ctx, cfg, opts...)
	if err != nil {
		return nil, hideConnect(err, url, cfg)
	}
	return s, nil
}

// ConnectConfig returns a session on the database of cfg (from
// pgconn.ParseConfig; copied, not changed), whose DialFunc, TLS and
// fallback hosts every lock connection uses, under this package's session
// parameters (docs/backends/postgresql.md#set-up). It checks the server
// (PostgreSQL 14 or later, no pooler: ErrPooler) and its token table
// (created if missing, else ErrTokenTable; trusted, else
// ErrUntrustedTable). Errors: recipe.ErrBadOption (a bad option, a nil cfg,
// an unknown database or parameter), recipe.ErrUnreachable in a
// *recipe.OpError, recipe.ErrNoPermission for refused credentials, ctx's
// cause (docs/backends.md#errors-at-connect).
func ConnectConfig(ctx context.Context, cfg *pgconn.Config, opts ...Option) (*Session, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, fmt.Errorf("%w: pglock: nil *pgconn.Config", recipe.ErrBadOption)
	}
	s := &Session{
		cfg: cfg.Copy(), ttl: o.ttl, ping: o.ttl / 10, loss: o.ttl / 2,
		table: o.table, log: o.log, metrics: o.metrics, life: life.New(),
		identity: o.identity, poll: o.poll,
		limit: newLimiter(o.maxConns), maxConns: o.maxConns,
	}
	if s.cfg.ConnectTimeout == 0 {
		s.cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if o.tlsSet {
		if err := applyTLS(s.cfg, o.tls); err != nil {
			s.life.Close()
			return nil, err
		}
	}
	for k, v := range s.pgParams() {
		s.cfg.RuntimeParams[k] = v
	}
	// A context that ends sets a deadline on the socket instead of sending a
	// cancel request at once: an interrupted listen between pings leaves the
	// connection usable. (An interrupted statement closes the connection,
	// and pgx sends the cancel request then.)
	s.cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}

	var conn *pgconn.PgConn
	err = s.guard(ctx, func(ctx context.Context) (err error) {
		conn, err = s.dial(ctx)
		return err
	})
	if err != nil {
		s.life.Close()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			// ctx's deadline passed before any server answered: unreachable
			// and the deadline, as on every backend.
			err = connerr.TimedOut(ctx, err)
		}
		return nil, err
	}
	defer (&lockConn{PgConn: conn, s: s}).hangUp() // gone from the server when ConnectConfig returns
	rows, err := query(ctx, conn, "SELECT pg_catalog.pg_backend_pid()")
	if err == nil && (len(rows) != 1 || string(rows[0][0]) != strconv.FormatUint(uint64(conn.PID()), 10)) {
		err = ErrPooler
	}
	if err == nil {
		err = s.checkTable(ctx, conn, o.trusted)
	}
	if err != nil {
		s.life.Close()
		return nil, err
	}
	return s, nil
}

// pgParams are the session parameters of every lock connection, sent in the
// startup message (PgBouncer refuses them unless told to ignore them).
func (s *Session) pgParams() map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	secs := func(d time.Duration) string { return strconv.Itoa(int(math.Ceil(d.Seconds()))) }
	p := map[string]string{
		// The server's bound on a silent holder: the holder's pings keep
		// the session busy at least every ttl/10; without them the server
		// ends the session ttl after the last one it received.
		"idle_session_timeout":                ms(s.ttl),
		"idle_in_transaction_session_timeout": ms(s.ttl),
		// A dead peer on the network: keep-alive probes start after ttl/2
		// of silence and give up after keepAliveCount more tenths (at
		// least ttl in all); unacknowledged data gives up after ttl.
		"tcp_keepalives_idle":     secs(s.ttl / 2),
		"tcp_keepalives_interval": secs(s.ttl / 10),
		"tcp_keepalives_count":    strconv.Itoa(keepAliveCount),
		"tcp_user_timeout":        ms(s.ttl),
		// A waiter whose client closed its connection leaves the lock
		// queue within a ping interval, even if no cancel request arrived.
		"client_connection_check_interval": ms(s.ping),
		// The wait is one statement and may last: no timeouts from the
		// server's or role's defaults.
		"statement_timeout": "0",
		"lock_timeout":      "0",
		// A token counter bump is durable when Acquire returns.
		"synchronous_commit": "on",
	}
	if s.cfg.RuntimeParams["application_name"] == "" {
		p["application_name"] = "zkrecipes-pglock"
	}
	return p
}

// TTL returns the session's lease time to live (WithTTL).
func (s *Session) TTL() time.Duration { return s.ttl }

// dialLock opens an acquisition's connection, which takes over the slot
// of WithMaxConns that enter took (given back here if the dial fails); a
// server out of connection slots is ErrConnLimit.
func (s *Session) dialLock(ctx context.Context) (*lockConn, error) {
	conn, err := s.dial(ctx)
	if err != nil {
		s.limit.slots.release()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "53300" { // too_many_connections
			err = fmt.Errorf("%w: %w", ErrConnLimit, err)
		}
		return nil, err
	}
	return &lockConn{PgConn: conn, s: s, slot: true}, nil
}

// dial opens a lock connection and checks it reaches a server session of
// its own.
func (s *Session) dial(ctx context.Context) (*pgconn.PgConn, error) {
	conn, err := pgconn.ConnectConfig(ctx, s.cfg)
	if err != nil {
		err = hideConnect(answerOnly(err), "", s.cfg) // no password in any error (secrets.go)
		if ctxend.Ended(ctx) {
			// A dial cut short by the caller's deadline or cancellation
			// answers with ctx's cause (recipe.Lock's contract), not as a
			// connection failure, also when the dial's own timeout saw the
			// deadline before ctx's timer did.
			return nil, fmt.Errorf("%w (%w)", ctxend.Cause(ctx), err)
		}
		var ne net.Error
		var pe *pgconn.PgError
		if connerr.KindOf(err) == connerr.Refused || errors.As(err, &pe) {
			// A TLS alert refusing our certificate is a net.Error too, but
			// a refusal, as 28000 is: recipe.ErrNoPermission; a server's
			// answer is classified by its SQLSTATE (reach.go).
			return nil, classifyDial(err, s.pgParams())
		}
		if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The server could not be reached (or hung up before it
			// answered): the same typed error on every backend.
			return nil, &recipe.OpError{Op: "connect", Err: fmt.Errorf("%w: %w", recipe.ErrUnreachable, err)}
		}
		return nil, classifyDial(err, nil) // TLS (reach.go)
	}
	return conn, nil
}

// createTable creates the token table, qualified as pgtrust quoted it. It
// is no error if someone else created it meanwhile (checkTable checks it
// next).
func (s *Session) createTable(ctx context.Context, conn *pgconn.PgConn, table string) error {
	create := "CREATE TABLE IF NOT EXISTS " + table + " (\n" +
		"  key  bigint          PRIMARY KEY, -- pglock.Key(name)\n" +
		"  name pg_catalog.text NOT NULL,    -- the first lock name that used key\n" +
		"  n    bigint NOT NULL CHECK (n OPERATOR(pg_catalog.>) 0), -- the last token granted\n" +
		"  " + delayColumns + ", -- WithLockDelay's (delay.go)\n" +
		"  " + holderColumns + " -- the holder's record (holder.go)\n)"
	_, err := query(ctx, conn, create)
	if err == nil {
		return nil
	}
	if rows, err2 := query(ctx, conn, "SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL", table); err2 == nil && len(rows) == 1 && string(rows[0][0]) == "t" {
		return nil // created by someone else meanwhile
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("%w: %w; an administrator can create it with:\n%s;\nGRANT SELECT, INSERT, UPDATE ON %s TO <role>;"+
		"\n(then every role granted INSERT or UPDATE must be the connecting one or named by WithTrustedRoles)",
		ErrTokenTable, err, create, table)
}

// Close ends the session: Acquire calls in flight return
// recipe.ErrSessionClosed, and every live lease's context ends with that
// cause; their connections are closed without unlocking, which the server
// takes as the end of their locks: an unclean end, after which a lock
// with WithLockDelay serves its delay (Release first to avoid that). Later
// calls on the session's locks return recipe.ErrSessionClosed. Close
// returns when all of them have finished; it is idempotent and returns nil.
func (s *Session) Close() error {
	s.life.Close() // each lease's monitor ends its lease and hangs up
	s.life.Wait()
	return nil
}
