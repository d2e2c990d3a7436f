package zookeeper

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Defaults for Connect's options.
const (
	// defaultSessionTimeout is the session timeout requested from the server.
	// The server may negotiate it into its [minSessionTimeout,
	// maxSessionTimeout] range; the Session always works with the negotiated
	// value.
	defaultSessionTimeout = 10 * time.Second
	// defaultMaxPacket is the packet limit (WithMaxPacket) unless set: the
	// default jute.maxbuffer of ZooKeeper servers, 0xfffff bytes (1 MiB less
	// one byte), the largest request a server accepts.
	defaultMaxPacket = 1<<20 - 1
)

const (
	// defaultConnectTimeout bounds how long Connect waits for the first
	// session when ctx has no earlier deadline (WithConnectTimeout).
	defaultConnectTimeout = 15 * time.Second
	// defaultSuspendFraction is the fraction f of the negotiated session
	// timeout used by TolerateSuspension when given 0.
	defaultSuspendFraction = 0.5
	// minMaxPacket and maxMaxPacket bound WithMaxPacket. go-zookeeper
	// re-registers a connection's watches in requests of up to 128 KiB
	// (minMaxPacket), which a smaller limit would refuse; the client keeps
	// a send buffer of the limit's size per connection.
	minMaxPacket = 128 << 10
	maxMaxPacket = 64 << 20
)

// SuspendPolicy says how long ownership survives a suspended connection:
// TolerateSuspension's, or the zero SuspendPolicy, the default (Curator's
// standard one): every lease ends the moment the connection is SUSPENDED,
// i.e. when the client notices the disconnect, and at the latest 2/3 of
// the negotiated session timeout after the last server reply
// (Session.LastServerReply: the send time of the newest request a server
// answered), which is when go-zookeeper itself would declare the
// connection dead.
type SuspendPolicy struct {
	tolerate bool
	fraction float64
}

// TolerateSuspension keeps leases alive while the connection is SUSPENDED,
// until LastServerReply + f × the negotiated session timeout (counted from
// the send time of the newest request a server answered, never from when a
// disconnect or a late reply was noticed, C9); a reconnection to the same
// session before then keeps every lease. f must be in [0.4, 0.9] (below, a
// healthy connection pinged every third of the timeout could lose leases;
// at 1 the server may have expired the session and granted the lock to
// someone else): Connect returns recipe.ErrBadOption for any other f, NaN
// included; f == 0 means 0.5. See docs/backends/zookeeper.md#the-two-numbers.
func TolerateSuspension(f float64) SuspendPolicy {
	if f == 0 {
		f = defaultSuspendFraction
	}
	return SuspendPolicy{tolerate: true, fraction: f}
}

// describe names the policy in log lines and errors.
func (p SuspendPolicy) describe() string {
	if !p.tolerate {
		return "revoke-on-suspend"
	}
	return fmt.Sprintf("tolerate-suspension(f=%.2f)", p.fraction)
}

// revokeAfter is how long after the last server reply ownership ends.
func (p SuspendPolicy) revokeAfter(timeout time.Duration) time.Duration {
	if !p.tolerate {
		return timeout * 2 / 3
	}
	return time.Duration(float64(timeout) * p.fraction)
}

type config struct {
	sessionTimeout time.Duration
	connectTimeout time.Duration
	cleanupTimeout time.Duration
	logger         *slog.Logger
	acl            []zk.ACL
	auth           []authInfo
	newBackOff     func() backoff.BackOff
	policy         SuspendPolicy
	dialer         zk.Dialer
	tls            *tls.Config // WithTLS; nil: plain TCP
	metrics        recipe.Metrics
	maxPacket      int
}

type authInfo struct {
	scheme string
	auth   []byte
}

// Option configures Connect.
type Option func(*config)

// WithSessionTimeout sets the requested session timeout (default
// 10 s; 1 ms to about 24 days, go-zookeeper sends it as int32
// milliseconds). The server negotiates it into its configured range
// (by default 2 to 20 ticks). Keep it at 2 s or more in practice:
// go-zookeeper waits 1 s before redialing after it has tried every server,
// so with a shorter timeout even a brief blip can expire the session.
// Connect logs one WARN when the negotiated timeout is under a second or
// not the one asked for (warnSessionTimeout).
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.sessionTimeout = d } }

// shortSession is the negotiated session timeout under which Connect
// warns: go-zookeeper redials a second after a dropped connection, so a
// shorter session expires at the first blip.
const shortSession = time.Second

// warnSessionTimeout logs one WARN on log when the negotiated session
// timeout is under shortSession or differs from the requested one (to the
// millisecond, the protocol's unit), with both and what the negotiated one
// makes of the two numbers (docs/backends/zookeeper.md#the-two-numbers): the
// holder's lease ends at the latest p.revokeAfter(T) after the newest
// answered request, and the server expires the session, freeing its locks,
// no sooner than T after the last request it received.
func warnSessionTimeout(log *slog.Logger, requested, negotiated time.Duration, p SuspendPolicy) {
	var why string
	switch {
	case negotiated < shortSession:
		why = "under a second: a blip expires the session (go-zookeeper redials a second after a drop)"
	case negotiated != requested.Truncate(time.Millisecond):
		why = "negotiated by the server to another value than requested"
	default:
		return
	}
	log.Warn("zookeeper: session timeout "+why, "requested", requested, "negotiated", negotiated,
		"lease_ends_within", p.revokeAfter(negotiated), "server_expires_after", negotiated)
}

// WithConnectTimeout bounds how long Connect waits for the first session
// (default 15 s); ctx's deadline applies too.
func WithConnectTimeout(d time.Duration) Option { return func(c *config) { c.connectTimeout = d } }

// WithCleanupTimeout bounds how long a cleanup delete (of a waiter's znode
// after cancellation, of a released lease's znode) keeps retrying on
// connection loss before it is handed to the Session's background cleaner,
// which retries on every reconnection of the same session; and how long a
// failed or cancelled Acquire waits, while connected, for its create in
// flight and for its delete. Default: the negotiated session timeout.
func WithCleanupTimeout(d time.Duration) Option { return func(c *config) { c.cleanupTimeout = d } }

// WithLogger sets the logger for session state changes, lost leases and
// cleanup, which the recipes built on the Session use too; go-zookeeper's
// own lines go to it at debug level, but its failures to re-register
// watches or credentials at error level. Default (also for nil): WARN and
// above, to the handler of slog.Default() when Connect is called, so a
// healthy Session logs nothing and a failing one is seen; pass
// slog.Default() for the INFO lines too (connected, reconnected, closed),
// slog.New(slog.DiscardHandler) for none.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMaxPacket sets the packet limit, in bytes: the largest request frame
// (after the 4-byte length prefix) the Session sends; set it to the
// servers' jute.maxbuffer when they run with another value, never above it.
// Default 1048575 (1 MiB less one byte, the servers' default); 128 KiB to
// 64 MiB, else Connect returns recipe.ErrBadOption. Nothing over it is sent:
// a recipe path or node data too large fails where it is given or at the
// call (recipe.ErrTooLarge), a request through Conn with an *recipe.OpError
// matching it (zk.ErrShortBuffer). Above the default, a request lost twice
// right after it was sent is not sent again (recipe.ErrTooLarge): see
// docs/zookeeper-client.md#lost-sends-and-packet-limits.
func WithMaxPacket(bytes int) Option { return func(c *config) { c.maxPacket = bytes } }

// WithACL sets the ACL of every znode the recipes create (default
// zk.WorldACL(zk.PermAll)), their directories included: it must grant the
// Session itself READ, CREATE and DELETE (ZooKeeper deletes a node only
// with DELETE on its parent), else Connect returns ErrUnusableACL. With
// an ACL that keeps CREATE, DELETE or ADMIN from others, a queue directory
// that exists already must keep them from others too (ErrUntrustedDir).
func WithACL(acl []zk.ACL) Option { return func(c *config) { c.acl = acl } }

// WithAuth adds authentication (e.g. scheme "digest", auth "user:password"),
// sent right after the session is established (within Connect's ctx and
// connect timeout) and again by go-zookeeper on every reconnect. If the
// server refuses it, Connect returns an *recipe.OpError (Op "auth") matching
// recipe.ErrNoPermission and zk.ErrAuthFailed.
func WithAuth(scheme string, auth []byte) Option {
	return func(c *config) { c.auth = append(c.auth, authInfo{scheme, auth}) }
}

// WithRetryPolicy sets the backoff between retries of an operation that
// failed with a connection-level error (default: exponential, 20 ms to 1 s,
// no total limit: ctx or Close end the retries; while no server answers, a
// retry waits for the connection, across a session's loss, so bound it with
// ctx's deadline). A
// policy that stops makes the operation return the last error.
func WithRetryPolicy(newBackOff func() backoff.BackOff) Option {
	return func(c *config) { c.newBackOff = newBackOff }
}

// WithSuspendPolicy sets the suspension policy (default: the zero
// SuspendPolicy, which revokes every lease at SUSPENDED).
func WithSuspendPolicy(p SuspendPolicy) Option { return func(c *config) { c.policy = p } }

// WithDialer sets the function used to open TCP connections to servers
// (go-zookeeper's zk.Dialer); serverkit's fault proxy plugs in here. With
// WithTLS, TLS runs over the connections it returns.
func WithDialer(d zk.Dialer) Option { return func(c *config) { c.dialer = d } }

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 0
	return b
}

func buildConfig(opts []Option) (config, error) {
	c := config{
		sessionTimeout: defaultSessionTimeout,
		connectTimeout: defaultConnectTimeout,
		acl:            zk.WorldACL(zk.PermAll),
		newBackOff:     defaultBackOff,
		maxPacket:      defaultMaxPacket,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.logger == nil {
		c.logger = slog.New(warnOnly{slog.Default().Handler()})
	}
	if err := prepareTLS(&c); err != nil {
		return c, err
	}
	switch {
	case c.sessionTimeout < time.Millisecond || c.sessionTimeout > math.MaxInt32*time.Millisecond:
		return c, fmt.Errorf("%w: session timeout %v must be between 1ms and %v", recipe.ErrBadOption, c.sessionTimeout, math.MaxInt32*time.Millisecond)
	case c.connectTimeout <= 0:
		return c, fmt.Errorf("%w: connect timeout %v must be positive", recipe.ErrBadOption, c.connectTimeout)
	case c.cleanupTimeout < 0:
		return c, fmt.Errorf("%w: cleanup timeout %v must not be negative", recipe.ErrBadOption, c.cleanupTimeout)
	case c.policy.tolerate && !(c.policy.fraction >= 0.4 && c.policy.fraction <= 0.9): // NaN too
		return c, fmt.Errorf("%w: suspension fraction %v must be in [0.4, 0.9]", recipe.ErrBadOption, c.policy.fraction)
	case len(c.acl) == 0:
		return c, fmt.Errorf("%w: empty ACL", recipe.ErrBadOption)
	case c.newBackOff == nil:
		return c, fmt.Errorf("%w: nil retry policy", recipe.ErrBadOption)
	case c.maxPacket < minMaxPacket || c.maxPacket > maxMaxPacket:
		return c, fmt.Errorf("%w: packet limit %d bytes must be between %d and %d", recipe.ErrBadOption, c.maxPacket, minMaxPacket, maxMaxPacket)
	}
	return c, nil
}

// warnOnly passes the records of level WARN and above to h: the default
// logger (see WithLogger).
type warnOnly struct{ h slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.h.Enabled(ctx, l)
}
func (w warnOnly) Handle(ctx context.Context, r slog.Record) error { return w.h.Handle(ctx, r) }
func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler           { return warnOnly{w.h.WithAttrs(as)} }
func (w warnOnly) WithGroup(name string) slog.Handler              { return warnOnly{w.h.WithGroup(name)} }
