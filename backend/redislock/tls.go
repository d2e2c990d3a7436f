package redislock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/connerr"
	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithTLS makes Connect speak TLS to the server, with a copy of cfg (nil:
// the system's roots, no client certificate). Give a client certificate in
// cfg.Certificates (or GetClientCertificate) for a server with
// tls-auth-clients yes, and the server's authority in cfg.RootCAs. The
// server's certificate is verified against the URL's host unless
// cfg.ServerName names another; InsecureSkipVerify without a
// VerifyConnection or VerifyPeerCertificate of one's own is refused
// (recipe.ErrBadOption), and so is a MaxVersion below TLS 1.2 (no version
// would be left); a MinVersion below TLS 1.2 is raised to it.
//
// TLS is used when the URL is rediss:// or WithTLS is given; WithTLS's
// configuration wins over rediss://'s (its skip_verify parameter included)
// and turns a redis:// URL into TLS too: a Session asked for TLS never
// talks in plaintext, WithDialer included (the dialer's connection carries
// the TLS). A server certificate that fails verification makes Connect fail
// with an error from which errors.As extracts the
// *tls.CertificateVerificationError. Not accepted by NewSession (configure
// the client's TLSConfig instead).
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
	ro.Dialer = tlsDialer(dial, ro.TLSConfig, timeout)
}

// defaultDialTimeout is go-redis's dial timeout when the URL sets none.
const defaultDialTimeout = 5 * time.Second

// tlsDialer opens a connection with dial and runs a TLS client over it,
// the whole bounded by timeout as go-redis bounds its own TLS dial.
func tlsDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			err, _ = connerr.Handshake(err, addr, cfg, tlsHint)
			return nil, err
		}
		return tc, nil
	}
}
