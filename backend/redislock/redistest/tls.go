package redistest

import (
	"context"
	"crypto/tls"
	"strconv"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/lazy"
)

// LaunchTLS is Launch for a server that speaks TLS only (tls-port; the
// plain port is off), with a server certificate for 127.0.0.1, ::1 and
// localhost, and refuses a client without a certificate signed by its own
// authority (tls-auth-clients yes). The certificates are fresh ones
// (certtest.Generate) in the server's directory: TLSFiles names them,
// ClientTLS is a client configuration that passes. REDIS_TEST_ADDR is not
// consulted: a TLS server is always started from the binary, which must be
// built with TLS (Debian's is).
func LaunchTLS(ctx context.Context, opts ...Option) (*Server, error) {
	return launchOrExplain(ctx, opts, true, true, LocalInstallHint)
}

var sharedTLS lazy.Shared[*Server]

// SharedTLS returns the test binary's one TLS server (LaunchTLS), launched
// on first use and stopped by Main (or StopShared); tests that share it keep
// to key prefixes of their own. When none can be had the test fails at
// once, with InstallHint, and later calls fail the same way.
func SharedTLS(tb testing.TB) *Server {
	tb.Helper()
	return sharedTLS.Get(tb, "redistest.SharedTLS", launchTLS)
}

func launchTLS() (*Server, error) { return LaunchTLS(context.Background()) }

// stopSharedTLS stops the SharedTLS server, if one was launched.
func stopSharedTLS() { sharedTLS.StopOrWarn(nil, "redistest: stopping the TLS server") }

// TLSFiles returns the certificate files of a server of LaunchTLS, and
// false for a plain one.
func (s *Server) TLSFiles() (certtest.Files, bool) { return certtest.Held(s.certs) }

// ClientTLS returns a client configuration the server accepts (its
// authority, the client certificate; no ServerName, which redislock sets
// from the URL), or nil for a plain server. It panics if the files can't be
// read (LaunchTLS wrote them).
func (s *Server) ClientTLS() *tls.Config { return certtest.MustClientConfig(s.certs, "redistest") }

// clientTLS is ClientTLS for the harness's own connections (ping, Client),
// which name the server themselves.
func (s *Server) clientTLS() *tls.Config {
	c := s.ClientTLS()
	if c != nil {
		c.ServerName = "127.0.0.1"
	}
	return c
}

// portArgs are the server's listening arguments: port, or for a TLS server
// tls-port with the plain port off and client certificates required.
func (s *Server) portArgs(port int) []string {
	if s.certs == nil {
		return []string{"--port", strconv.Itoa(port)}
	}
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", s.certs.ServerCert, "--tls-key-file", s.certs.ServerKey,
		"--tls-ca-cert-file", s.certs.CA, "--tls-auth-clients", "yes"}
}

// scheme is the scheme of URL: rediss:// for a TLS server.
func (s *Server) scheme() string {
	if s.certs != nil {
		return "rediss"
	}
	return "redis"
}
