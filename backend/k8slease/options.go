package k8slease

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

const (
	// DefaultLeaseDuration is the leaseDurationSeconds a holder writes into
	// the Lease (client-go's leader election uses the same 15 s by default).
	DefaultLeaseDuration = 15 * time.Second

	// DefaultNamespace is the namespace of a lock named without one, unless
	// WithNamespace gives another.
	DefaultNamespace = "default"

	// DefaultConnectTimeout bounds how long Connect waits for the API
	// server's first answer; ctx's deadline applies too.
	DefaultConnectTimeout = 10 * time.Second

	// AdvisedLeaseDuration is the shortest lease duration advised outside
	// tests: Connect and NewSession accept a shorter one (down to 1 s) but
	// log a warning.
	AdvisedLeaseDuration = 5 * time.Second

	// MaxIdentityLen is the longest WithIdentity prefix accepted, in bytes.
	MaxIdentityLen = 128
)

// config is what the options set.
type config struct {
	duration       time.Duration
	namespace      string
	identity       string // WithIdentity's prefix ("" until set)
	connectTimeout time.Duration
	cleanupTimeout time.Duration // 0: the lease duration
	logger         *slog.Logger
	metrics        recipe.Metrics
}

// Option configures Connect and NewSession.
type Option func(*config)

// WithLeaseDuration sets the leaseDurationSeconds a holder writes into the
// Lease (default DefaultLeaseDuration): a whole number of seconds, at least
// 1 s, as the Lease field holds it. A holder renews every sixth of it, and
// its Lease context ends 2/3 of it after the send of its newest
// acknowledged renewal; a contender takes over an unreleased Lease only
// once the duration written in the Lease has passed since it saw the
// record last change. A bad value makes Connect fail with an error
// matching recipe.ErrBadOption; one below AdvisedLeaseDuration is logged at
// Warn.
func WithLeaseDuration(d time.Duration) Option { return func(c *config) { c.duration = d } }

// WithNamespace sets the namespace of the locks New is given a bare name
// for (default DefaultNamespace): a DNS label (RFC 1123) of at most 63
// bytes, else Connect fails with an error matching recipe.ErrBadOption.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithIdentity sets the readable start of the Session's identity (default:
// the host name), to which a random suffix is always added so that two
// Sessions never share one; each grant writes the identity and a grant
// number as the Lease's holderIdentity. It is stored in the Lease, readable
// by anyone who can read the Lease: never put a secret in it. At most
// MaxIdentityLen bytes of printable text, else recipe.ErrBadOption.
func WithIdentity(prefix string) Option { return func(c *config) { c.identity = prefix } }

// WithConnectTimeout bounds how long Connect and NewSession wait for the
// API server's first answer (default DefaultConnectTimeout); it must be
// positive.
func WithConnectTimeout(d time.Duration) Option { return func(c *config) { c.connectTimeout = d } }

// WithCleanupTimeout bounds how long Release retries its update (and a
// failed acquisition its cleanup) past the caller's context before the
// Session goes on trying in the background (default, and 0: the lease
// duration). It must not be negative.
func WithCleanupTimeout(d time.Duration) Option { return func(c *config) { c.cleanupTimeout = d } }

// WithLogger sets the logger of the Session (default, and nil:
// slog.Default()): a lost Lease at Warn with its lock, token and cause
// (Debug when the Session was closed); failed renewals and retries at
// Debug.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMetrics installs m on the Session (default, and nil: none). Every
// event has kind "lock" and dir the lock's "namespace/name":
// AcquireStarted and AcquireDone for every Acquire and TryAcquire, Waiting
// +1 and -1 around the time an Acquire waits behind another holder,
// LeaseLost when a granted Lease ends other than by its Release, and
// SessionState CONNECTED at Connect and LOST (recipe.ErrSessionClosed) at
// Close: a Session has no server-side state to lose. StaleRejected is
// never called (wire it at a fence.Guard).
func WithMetrics(m recipe.Metrics) Option { return func(c *config) { c.metrics = m } }

// buildConfig applies the options (nil ones skipped) and checks them.
func buildConfig(opts []Option) (config, error) {
	c := config{duration: DefaultLeaseDuration, namespace: DefaultNamespace, connectTimeout: DefaultConnectTimeout}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	bad := func(format string, args ...any) (config, error) {
		return c, fmt.Errorf("%w: k8slease: "+format, append([]any{recipe.ErrBadOption}, args...)...)
	}
	switch {
	case c.duration < time.Second || c.duration%time.Second != 0 || c.duration > maxDuration:
		return bad("WithLeaseDuration(%v): want a whole number of seconds from 1s to %v", c.duration, maxDuration)
	case c.connectTimeout <= 0:
		return bad("WithConnectTimeout(%v): need a positive duration", c.connectTimeout)
	case c.cleanupTimeout < 0:
		return bad("WithCleanupTimeout(%v): need 0 (the lease duration) or more", c.cleanupTimeout)
	}
	if why := checkNamespace(c.namespace); why != "" {
		return bad("WithNamespace(%q): the namespace %s", c.namespace, why)
	}
	if why := checkIdentity(c.identity); why != "" {
		return bad("WithIdentity: %s", why)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c, nil
}

// maxDuration keeps leaseDurationSeconds within the Lease field (int32) with
// room to spare: a day.
const maxDuration = 24 * time.Hour
