package pglock

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Defaults and limits of the options.
const (
	// DefaultTTL is the lease time to live of WithTTL's default: the server
	// ends a holder's session (and frees its lock) once it has heard nothing
	// from it for this long; the holder gives the lease up after half of it.
	DefaultTTL = 10 * time.Second
	// MinTTL and MaxTTL bound WithTTL.
	MinTTL = time.Second
	MaxTTL = 24 * time.Hour

	// DefaultTable is the token table's name (WithTable's default).
	DefaultTable = "zkrecipes_lock_tokens"

	// DefaultConnectTimeout bounds each connection attempt when the URL sets
	// no connect_timeout.
	DefaultConnectTimeout = 10 * time.Second

	// DefaultPollInterval is WithPollInterval's default: how often
	// ObserveHolder reads the lock's holder.
	DefaultPollInterval = 500 * time.Millisecond
	// MinPollInterval bounds WithPollInterval from below (its bound above
	// is half the TTL).
	MinPollInterval = 10 * time.Millisecond

	// MaxIdentityLen is the longest identity WithIdentity accepts, in
	// bytes.
	MaxIdentityLen = 256

	// keepAliveCount is the number of unanswered TCP keep-alive probes after
	// which the server drops a connection.
	keepAliveCount = 5
)

// Option configures a Session (Connect, ConnectConfig).
type Option func(*options)

type options struct {
	ttl     time.Duration
	table   string
	log     *slog.Logger
	metrics recipe.Metrics

	maxConns int         // WithMaxConns (limit.go)
	trusted  []string    // WithTrustedRoles (trust.go)
	tls      *tls.Config // WithTLS's, nil: the system's roots
	tlsSet   bool        // WithTLS was given
	identity string      // WithIdentity (holder.go)
	poll     time.Duration
}

// WithTTL sets the lease time to live (default DefaultTTL, between MinTTL
// and MaxTTL). It is the server's bound: a session the server has heard
// nothing from for ttl is ended by the server (idle_session_timeout; the TCP
// keep-alive and user timeouts are set no shorter), which frees its lock. The
// holder pings every ttl/10 and ends its lease context ttl/2 after the send
// time of the last ping answered, so it always gives up first.
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl = ttl } }

// WithTable sets the token table (default DefaultTable): a lowercase
// identifier, optionally schema-qualified ("locks.tokens"). A name without
// a schema means current_schema() (the first existing schema of
// search_path). It is created there on first use if missing; an existing
// table must pass the trust rules (WithTrustedRoles, ErrUntrustedTable).
// Connect resolves it once: every statement after uses the qualified name.
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithLogger sets the logger (default, and nil: slog.Default()): grants and releases at
// Debug, lost leases (with their cause) and key collisions at Warn, a lease
// ended by Session.Close at Debug.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithMetrics installs m (default and nil: none). Every Acquire and
// TryAcquire reports AcquireStarted and AcquireDone, an Acquire that finds
// the lock held reports Waiting +1 and -1 around its wait, and a lease that
// ends other than by its Release reports LeaseLost; kind is "lock", dir the
// name given to New. There is no SessionState: a Session has no connection
// of its own, so no connection state to report.
func WithMetrics(m recipe.Metrics) Option { return func(o *options) { o.metrics = m } }

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$`)

// newOptions applies opts to the defaults and checks the result
// (recipe.ErrBadOption).
func newOptions(opts []Option) (options, error) {
	o := options{ttl: DefaultTTL, table: DefaultTable, log: slog.Default(), maxConns: DefaultMaxConns,
		identity: defaultIdentity(), poll: DefaultPollInterval}
	for _, opt := range opts {
		if opt != nil { // a nil Option is skipped, as zookeeper.Connect does
			opt(&o)
		}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	switch {
	case o.ttl < MinTTL || o.ttl > MaxTTL:
		return o, fmt.Errorf("%w: pglock: WithTTL(%v): want %v to %v", recipe.ErrBadOption, o.ttl, MinTTL, MaxTTL)
	case !tableName.MatchString(o.table):
		return o, fmt.Errorf("%w: pglock: table %q is not a lowercase identifier, optionally schema-qualified", recipe.ErrBadOption, o.table)
	case o.maxConns < 1 || o.maxConns > MaxMaxConns:
		return o, fmt.Errorf("%w: pglock: max conns %d outside [1, %d]", recipe.ErrBadOption, o.maxConns, MaxMaxConns)
	case o.poll < MinPollInterval || o.poll > o.ttl/2:
		return o, fmt.Errorf("%w: pglock: WithPollInterval(%v): want %v to half the TTL (%v)", recipe.ErrBadOption, o.poll, MinPollInterval, o.ttl/2)
	}
	if err := checkIdentity(o.identity); err != nil {
		return o, fmt.Errorf("%w: pglock: WithIdentity: %w", recipe.ErrBadOption, err)
	}
	return o, nil
}
