package pglock

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zkrecipes/zkrecipes/internal/tlsconf"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithTLS makes every connection of the Session use TLS with a copy of cfg
// (nil: the system's roots, no client certificate) on every host, whatever
// the URL's sslmode, sslrootcert, sslcert and sslkey say: a server without
// TLS is an error, never a plaintext session. Each host's certificate is
// verified against that host unless cfg.ServerName names another; one that
// fails makes Connect fail (errors.As finds the
// *tls.CertificateVerificationError). A MinVersion below TLS 1.2 is raised
// to it; InsecureSkipVerify without a verifier of one's own, a MaxVersion
// below TLS 1.2 or a Unix socket host is recipe.ErrBadOption
// (docs/backends/postgresql.md#tls).
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls, o.tlsSet = cfg, true }
}

// applyTLS makes every host of cfg (its own and its fallbacks') use TLS with
// tc, once per host and port: prefer's and allow's plaintext variants go.
func applyTLS(cfg *pgconn.Config, tc *tls.Config) error {
	if err := tlsconf.Check(tc); err != nil {
		return fmt.Errorf("%w: pglock: WithTLS: %w", recipe.ErrBadOption, err)
	}
	tc = tlsconf.Clone(tc)
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port}}, cfg.Fallbacks...)
	var hosts []*pgconn.FallbackConfig
	seen := map[string]bool{}
	for _, h := range all {
		if strings.HasPrefix(h.Host, "/") {
			return fmt.Errorf("%w: pglock: WithTLS: host %q is a Unix socket, which PostgreSQL serves without TLS", recipe.ErrBadOption, h.Host)
		}
		key := fmt.Sprintf("%s %d", h.Host, h.Port)
		if !seen[key] {
			seen[key] = true
			hosts = append(hosts, &pgconn.FallbackConfig{Host: h.Host, Port: h.Port, TLSConfig: tlsconf.ForHost(tc, h.Host)})
		}
	}
	cfg.Host, cfg.Port, cfg.TLSConfig = hosts[0].Host, hosts[0].Port, hosts[0].TLSConfig
	cfg.Fallbacks = hosts[1:]
	return nil
}
