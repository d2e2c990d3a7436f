package redislock

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Defaults and limits of the options.
const (
	// DefaultTTL is the lease time of a grant: the PX of the lock key, set
	// again by every renewal. A lease context ends 2/3 of it after the send
	// time of the last successful SET or renewal; renewals are sent every
	// third of it.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL WithTTL accepts. The holder's lease
	// context ends 2/3 of the TTL after the send of its last successful
	// renewal; the server expires the key the TTL after it ran that
	// renewal, which is later. The third in between must absorb a late
	// timer and the two clocks' rates: a second keeps that margin at
	// 333 ms (see Why MinTTL is a second in the package documentation).
	MinTTL = time.Second
	// DefaultKeyPrefix starts the names of the keys (and of the pub/sub
	// channels) of every lock of a Session.
	DefaultKeyPrefix = "zkrecipes:lock:"
	// MaxNameLen is the longest lock name New accepts, in bytes. Redis
	// itself allows far longer keys; a longer name is almost certainly a
	// mistake (data used as a name).
	MaxNameLen = 1024
	// MaxIdentityLen is the longest identity WithIdentity accepts, in
	// bytes.
	MaxIdentityLen = 128
	// DefaultHolderPoll is how often ObserveHolder reads the lock's holder:
	// a change is reported at most this long (plus one read) after the
	// server made it.
	DefaultHolderPoll = 500 * time.Millisecond
	// MinHolderPoll is the shortest interval WithHolderPoll accepts.
	MinHolderPoll = 10 * time.Millisecond
)

// Option configures Connect and NewSession.
type Option func(*config)

type config struct {
	ttl     time.Duration
	prefix  string
	logger  *slog.Logger
	metrics recipe.Metrics
	dialer  func(ctx context.Context, network, addr string) (net.Conn, error)
	tls     *tls.Config   // WithTLS's (checked), nil: the system's roots
	tlsSet  bool          // WithTLS was given
	lastTLS *lastDial     // the TLS dialer's last failure (applyTLS), nil: no TLS
	ident   string        // the readable part of every owner id (WithIdentity)
	poll    time.Duration // ObserveHolder's interval
	err     error
}

// WithTTL sets the lease time of every grant of the session's locks (default
// DefaultTTL, at least MinTTL, rounded down to a whole millisecond, which is
// the unit of PX). Smaller values free a crashed holder's lock sooner and
// end a cut-off holder's lease sooner, at the price of more renewals (one per
// held lock every third of it) and less room for pauses. Every session
// contending for a lock should use the same TTL: it also bounds how long a
// waiter sleeps when no release notification comes.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d < MinTTL {
			c.fail(fmt.Errorf("%w: redislock: WithTTL(%v): want at least %v", recipe.ErrBadOption, d, MinTTL))
			return
		}
		c.ttl = d.Truncate(time.Millisecond)
	}
}

// WithKeyPrefix sets the prefix of the session's key names (default
// DefaultKeyPrefix): lock name n uses the keys prefix+n+":holder",
// prefix+n+":token", prefix+n+":queue" and, with WithLockDelay,
// prefix+n+":delay", and its waiters the channels
// prefix+n+":wake:"+owner. Sessions agree on a lock when prefix+name is the
// same; use distinct prefixes for distinct applications on one server (and
// an ACL user's ~prefix* and &prefix* rights). The empty prefix is allowed.
func WithKeyPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithLogger sets the logger for renewal failures, losses, cleanup and
// server warnings (default, and nil: slog.Default(), so that a warning such
// as a server without fsync is seen).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMetrics reports the session's events to m (nil: none, the default),
// with kind "lock" and dir the lock's name as given to New:
// AcquireStarted and AcquireDone for every Acquire and TryAcquire, Waiting
// while an Acquire waits in the lock's queue, and LeaseLost. Redis has no
// session state machine, so SessionState is never called; nor is
// StaleRejected (wire it to a fence's OnStale, at the resource).
func WithMetrics(m recipe.Metrics) Option { return func(c *config) { c.metrics = m } }

// WithDialer makes Connect's client open its connections with dial (go-redis
// Options.Dialer), for example through a proxy or a test's fault injector.
// Not accepted by NewSession (the client already has its dialer).
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *config) {
		if dial == nil {
			c.fail(fmt.Errorf("%w: nil dialer", recipe.ErrBadOption))
			return
		}
		c.dialer = dial
	}
}

// WithIdentity makes id the readable part of the owner id of every grant
// of the session's locks (default: host name and process id, "host:pid"),
// which Mutex.Holder reads back as Holder.ID. It is public: anyone who may
// read the keys sees it. id must be 1 to MaxIdentityLen bytes of printable
// UTF-8 without ':' (the owner id's separator), and not "next" (a lock
// handed to a waiter is "next:" and its owner id); else Connect and
// NewSession return an error matching recipe.ErrBadOption. Contenders
// stay distinct whatever the ids: each Acquire call adds 130 random bits.
func WithIdentity(id string) Option {
	return func(c *config) {
		if err := checkIdentity(id); err != nil {
			c.fail(fmt.Errorf("%w: redislock: WithIdentity(%.64q): %v", recipe.ErrBadOption, id, err))
			return
		}
		c.ident = id
	}
}

// WithHolderPoll sets how often Mutex.ObserveHolder reads the lock's
// holder (default DefaultHolderPoll, at least MinHolderPoll): a change is
// reported at most d plus one read after the server made it, and a
// holder that comes and goes within d can be missed. Each observer sends
// one read-only script per d.
func WithHolderPoll(d time.Duration) Option {
	return func(c *config) {
		if d < MinHolderPoll {
			c.fail(fmt.Errorf("%w: redislock: WithHolderPoll(%v): want at least %v", recipe.ErrBadOption, d, MinHolderPoll))
			return
		}
		c.poll = d
	}
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func newConfig(opts []Option) (*config, error) {
	c := &config{ttl: DefaultTTL, prefix: DefaultKeyPrefix, poll: DefaultHolderPoll}
	for _, o := range opts {
		if o != nil { // a nil Option is skipped, as zookeeper.Connect does
			o(c)
		}
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.ident == "" {
		c.ident = defaultIdentity()
	}
	return c, c.err
}
