package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithTLS makes Connect speak TLS to the server, with a copy of cfg (nil:
// the system's roots, no client certificate), also for a redis:// URL and
// through WithDialer: a Session asked for TLS never talks in plaintext.
// The server's certificate is verified against the URL's host unless
// cfg.ServerName names another; a configuration that would not verify the
// server, or a MaxVersion below TLS 1.2, is refused (recipe.ErrBadOption).
// Not accepted by NewSession (see TLS in the package documentation).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if err := tlsconf.Check(cfg); err != nil {
			c.fail(fmt.Errorf("%w: WithTLS: %w", recipe.ErrBadOption, err))
			return
		}
		c.tls, c.tlsSet = cfg, true
	}
}

// applyTLS sets ro's TLS from WithTLS (which wins over rediss://), and
// makes ro's dialer run the TLS of either over WithDialer's dialer or a
// plain one like go-redis's own: go-redis applies TLSConfig only in its own
// dialer (a custom one alone would speak plaintext to a rediss:// URL), and
// its own reports a refusal without saying what it is. Ours classifies it
// (connerr.Handshake: recipe.ErrNoPermission for a client certificate
// refused, recipe.ErrUnreachable with the advice to check the port for a
// plain server).
func (c *config) applyTLS(ro *redis.Options) {
	if c.tlsSet {
		host, _, err := net.SplitHostPort(ro.Addr)
		if err != nil {
			host = ro.Addr
		}
		ro.TLSConfig = tlsconf.ForHost(tlsconf.Clone(c.tls), host)
	}
	if ro.TLSConfig == nil {
		return
	}
	timeout := ro.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	dial := c.dialer
	if dial == nil {
		// go-redis's own dialer without TLS: its timeout and TCP keep-alives.
		dial = redis.NewDialer(&redis.Options{DialTimeout: timeout})
	}
	c.lastTLS = &lastDial{}
	ro.Dialer = tlsDialer(dial, ro.TLSConfig, timeout, c.lastTLS)
}

// lastDial holds a TLS dialer's last described failure and how many of its
// handshakes wait for an answer, for Connect to describe its context's end:
// go-redis then reports the context's error alone (its dial may go on),
// losing the hint of a port that gives no TLS answer.
type lastDial struct {
	err     atomic.Pointer[error]
	waiting atomic.Int32
	// unsent: the last handshake done was asked for a client certificate
	// and sent none (TLS 1.3 refuses it only after the handshake).
	unsent atomic.Bool
}

// certUnsent reports whether the last handshake done was asked for a
// client certificate and sent none.
func (l *lastDial) certUnsent() bool { return l != nil && l.unsent.Load() }

// noAnswer reports whether a handshake timed out or still waits.
func (l *lastDial) noAnswer() bool {
	return l != nil && (l.waiting.Load() > 0 || errors.Is(l.get(), context.DeadlineExceeded))
}

// set records err.
func (l *lastDial) set(err error) { l.err.Store(&err) }

// get returns the last error recorded, nil if none (or l nil).
func (l *lastDial) get() error {
	if l == nil {
		return nil
	}
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

// defaultDialTimeout is go-redis's dial timeout when the URL sets none.
const defaultDialTimeout = 5 * time.Second

// tlsDialer opens a connection with dial and runs a TLS client over it,
// the whole bounded by timeout as go-redis bounds its own TLS dial. Each
// connection's configuration is tracked (tlsconf.Track), so that a TLS 1.2
// handshake_failure after the server asked for a certificate we did not
// have is classified as the refusal it is. A failure is also kept in last.
func tlsDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config, timeout time.Duration, last *lastDial) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tracked, req := tlsconf.Track(cfg)
		tc := tls.Client(conn, tracked)
		last.waiting.Add(1)
		err = tc.HandshakeContext(ctx)
		last.waiting.Add(-1)
		if err != nil {
			_ = conn.Close()
			err, _ = connerr.HandshakeTracked(err, addr, req, tlsHint)
			last.set(err)
			return nil, err
		}
		last.unsent.Store(req.Asked() && !req.Sent())
		return tc, nil
	}
}
