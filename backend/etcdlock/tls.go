package etcdlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithTLS makes Connect speak TLS to every endpoint, with a copy of cfg
// (nil: the system's roots, no client certificate). Give a client
// certificate in cfg.Certificates (or GetClientCertificate) for a server
// started with --client-cert-auth, and the server's authority in
// cfg.RootCAs. The certificate of each endpoint is verified against the
// endpoint's host unless cfg.ServerName names another; InsecureSkipVerify
// without a VerifyConnection or VerifyPeerCertificate of one's own is
// refused (recipe.ErrBadOption), and a MinVersion below TLS 1.2 is raised
// to it.
//
// TLS is used when the URL is etcds:// or WithTLS is given; WithTLS's
// configuration wins over etcds://'s default one, and turns an etcd:// URL
// into TLS too: a Session asked for TLS never talks in plaintext. A server
// certificate that fails verification makes Connect fail at once, with an
// error matching ErrUnreachable from which errors.As extracts the
// *tls.CertificateVerificationError. Connect only: NewSession refuses it
// (configure the client you give it instead).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		c.tls, c.tlsSet = cfg, true
		c.connectOnly = append(c.connectOnly, "WithTLS")
	}
}

// tlsScheme is the URL scheme of a TLS connection with the system's roots.
const tlsScheme = "etcds://"

// cutScheme cuts etcd:// or etcds:// off raw.
func cutScheme(raw string) (rest string, ok bool) {
	if rest, ok = strings.CutPrefix(raw, tlsScheme); ok {
		return rest, true
	}
	return strings.CutPrefix(raw, "etcd://")
}

// clientTLS returns the TLS configuration of a Connect to url, nil for a
// plain connection, or an error matching recipe.ErrBadOption for a
// configuration that would not verify the server.
func (c *config) clientTLS(url string) (*tls.Config, error) {
	if !c.tlsSet && !strings.HasPrefix(url, tlsScheme) {
		return nil, nil
	}
	if err := tlsconf.Check(c.tls); err != nil {
		return nil, fmt.Errorf("%w: WithTLS: %w", recipe.ErrBadOption, err)
	}
	return tlsconf.Clone(c.tls), nil
}

// handshake completes a TLS handshake on conn, a fresh connection to ep
// (host:port), so that a server certificate that fails verification is
// reported at once (gRPC would only retry until the connect timeout).
func handshake(ctx context.Context, conn net.Conn, ep string, cfg *tls.Config) error {
	host, _, err := net.SplitHostPort(ep)
	if err != nil {
		return err
	}
	tc := tls.Client(conn, tlsconf.ForHost(cfg, host))
	defer tc.Close()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake with %s: %w", ep, err)
	}
	return nil
}
