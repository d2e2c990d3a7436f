package etcdlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/lockname"
	"github.com/zkrecipes/zkrecipes/recipe"
)

const (
	// DefaultTTL is the time to live requested for a Session's etcd lease.
	DefaultTTL = 10 * time.Second

	// DefaultPrefix is the key prefix of a Session when neither the URL nor
	// WithPrefix gives one.
	DefaultPrefix = "/zkrecipes"

	// DefaultConnectTimeout bounds how long Connect and NewSession wait for
	// a connection and the first lease grant; ctx's deadline applies too.
	DefaultConnectTimeout = 10 * time.Second

	// MaxNameLen is the longest lock name New accepts, in bytes. etcd's own
	// limit is the request size (1.5 MiB by default), but every range
	// answer and watch event of the lock carries the key.
	MaxNameLen = 512

	// MaxPrefixLen is the longest key prefix a Session accepts, in bytes.
	MaxPrefixLen = 256

	// MaxIdentityLen is the longest identity WithIdentity and
	// Mutex.Proclaim accept, in bytes.
	MaxIdentityLen = 256
)

// closeTimeout bounds how long Close waits for the revoke of its lease.
const closeTimeout = 2 * time.Second

// config is what the options set.
type config struct {
	ttl            time.Duration
	prefix         string // "" until set
	connectTimeout time.Duration
	cleanupTimeout time.Duration // 0: the granted TTL
	logger         *slog.Logger
	identity       string         // WithIdentity's, else defaultIdentity()
	identitySet    bool           // WithIdentity was given
	metrics        recipe.Metrics // nil: none
	dialer         func(ctx context.Context, addr string) (net.Conn, error)
	tls            *tls.Config // WithTLS's, not checked yet
	tlsSet         bool        // WithTLS was given (nil means the system's roots)
	// Options that only Connect uses, for NewSession's check.
	connectOnly []string
}

// Option configures Connect and NewSession.
type Option func(*config)

// maxTTL bounds WithTTL: 2^31-1 s (68 years), far below where the
// deadlines' arithmetic would overflow (above 146 years, found by a new
// user's trial: every Acquire then failed as a lost lease).
const maxTTL = (1<<31 - 1) * time.Second

// WithTTL sets the time to live requested for the Session's etcd lease
// (default DefaultTTL): a whole number of seconds, from 1 s to 2^31-1 s. The server
// may raise it to its own minimum (1.5 election timeouts, rounded up to a
// second: 2 s with etcd's defaults); Session.TTL returns the granted one.
// Ownership ends 2/3 of the granted TTL after the send of the newest
// acknowledged keep-alive; keep-alives go out every TTL/6. A bad value makes
// Connect fail with an error matching recipe.ErrBadOption.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithPrefix sets the key prefix under which the Session's locks live
// (default DefaultPrefix), for NewSession or for a Connect URL without a
// path (a URL's path wins). It must start with "/", must not end with "/"
// and is at most MaxPrefixLen bytes; otherwise Connect fails with an error
// matching recipe.ErrBadOption.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithIdentity sets the identity that the Session's acquisitions publish
// as the value of their keys, which Mutex.Holder reads back as the
// holder's ID (default: "<hostname>:<pid>"). It is public, readable by
// anyone who may read the lock: name a process, never a secret. It must be
// 1 to MaxIdentityLen bytes of printable UTF-8; otherwise Connect and
// NewSession fail with an error matching recipe.ErrBadOption.
func WithIdentity(id string) Option {
	return func(c *config) { c.identity, c.identitySet = id, true }
}

// WithConnectTimeout bounds how long Connect and NewSession wait for the
// server (default DefaultConnectTimeout); it must be positive.
func WithConnectTimeout(d time.Duration) Option { return func(c *config) { c.connectTimeout = d } }

// WithCleanupTimeout bounds how long Release retries its delete (and a
// failed acquisition its cleanup) past the caller's context, before handing
// the delete to the Session, which goes on trying in the background while
// the key's lease lives (default, and 0: the granted TTL). It must not be
// negative.
func WithCleanupTimeout(d time.Duration) Option {
	return func(c *config) { c.cleanupTimeout = d }
}

// WithLogger sets the logger of the Session (default, and nil: slog.Default()): a lost
// Lease at Warn with its lock, token and cause (Debug when the Session was
// closed); etcd lease grants and losses, failed keep-alives and retries at
// Debug.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMetrics installs m on the Session (default, and nil: none). Every
// event has kind "lock" and dir the lock's name as given to New; besides
// the acquisitions, waits and lost leases, SessionState reports each etcd
// lease granted (CONNECTED, then RECONNECTED) and lost (SUSPENDED for a
// presumed loss, else LOST), and one last LOST at Close. LeaseLost and
// SessionState may be called under the Session's locks; StaleRejected is
// never called (see Metrics in the package documentation).
func WithMetrics(m recipe.Metrics) Option { return func(c *config) { c.metrics = m } }

// WithDialer makes Connect open its TCP connections with dial (for an SSH
// tunnel, a SOCKS proxy, or a fault-injecting proxy in tests). addr is
// "host:port". Connect only: NewSession refuses it (configure the client
// you give it instead).
func WithDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(c *config) {
		c.dialer = dial
		c.connectOnly = append(c.connectOnly, "WithDialer")
	}
}

// buildConfig applies the options (nil ones skipped) and checks them.
func buildConfig(opts []Option) (config, error) {
	c := config{ttl: DefaultTTL, connectTimeout: DefaultConnectTimeout}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.ttl < time.Second || c.ttl%time.Second != 0 || c.ttl > maxTTL:
		return c, fmt.Errorf("%w: etcdlock: WithTTL(%v): want a whole number of seconds, from 1s to %v", recipe.ErrBadOption, c.ttl, maxTTL)
	case c.connectTimeout <= 0:
		return c, fmt.Errorf("%w: WithConnectTimeout(%v): need a positive duration", recipe.ErrBadOption, c.connectTimeout)
	case c.cleanupTimeout < 0:
		return c, fmt.Errorf("%w: WithCleanupTimeout(%v): need a duration of 0 (the TTL) or more", recipe.ErrBadOption, c.cleanupTimeout)
	}
	if c.prefix != "" {
		if why := checkPrefix(c.prefix); why != "" {
			return c, fmt.Errorf("%w: WithPrefix(%q): %s", recipe.ErrBadOption, c.prefix, why)
		}
	}
	if c.identitySet {
		if why := checkIdentity(c.identity); why != "" {
			return c, fmt.Errorf("%w: etcdlock: WithIdentity(%s): %s", recipe.ErrBadOption, lockname.Quote(c.identity), why)
		}
	} else {
		c.identity = defaultIdentity()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c, nil
}
