package redislock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

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
// (recipe.ErrBadOption), and a MinVersion below TLS 1.2 is raised to it.
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
// makes a dialer of WithDialer carry the TLS of either: go-redis applies
// TLSConfig only in its own dialer, so a custom one alone would speak
// plaintext to a rediss:// URL.
func (c *config) applyTLS(ro *redis.Options) {
	if c.tlsSet {
		host, _, err := net.SplitHostPort(ro.Addr)
		if err != nil {
			host = ro.Addr
		}
		ro.TLSConfig = tlsconf.ForHost(tlsconf.Clone(c.tls), host)
	}
	if c.dialer != nil && ro.TLSConfig != nil {
		ro.Dialer = tlsDialer(c.dialer, ro.TLSConfig)
	}
}

// tlsDialer opens a connection with dial and runs a TLS client over it.
func tlsDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}
