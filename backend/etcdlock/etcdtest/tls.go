package etcdtest

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/lazy"
)

// LaunchTLS starts a local server that serves its clients TLS only
// (https://, server certificate for 127.0.0.1, ::1 and localhost) and
// refuses a client without a certificate signed by its own authority
// (--client-cert-auth). The certificates are fresh ones (certtest.Generate)
// in the server's directory: TLSFiles names them, ClientTLS is a client
// configuration that passes. ETCD_TEST_ENDPOINTS is not consulted: a TLS
// server is always started from the binary. The caller must Close it.
func LaunchTLS(ctx context.Context) (*Server, error) { return launchLocal(ctx, true) }

var sharedTLS lazy.Shared[*Server]

// SharedTLS is Shared for a TLS server (LaunchTLS): one for the whole test
// binary, launched on first use and stopped by Main (or StopShared).
func SharedTLS(tb testing.TB) *Server {
	tb.Helper()
	return sharedTLS.Get(tb, "etcdtest.SharedTLS", launchTLS)
}

func launchTLS() (*Server, error) { return LaunchTLS(context.Background()) }

// stopSharedTLS stops the SharedTLS server, if one was launched (StopShared).
// Its Close error is dropped, as before the holder.
func stopSharedTLS() { _ = sharedTLS.Stop(nil) }

// TLSFiles returns the certificate files of a server of LaunchTLS, and
// false for a plain one.
func (s *Server) TLSFiles() (certtest.Files, bool) { return certtest.Held(s.certs) }

// ClientTLS returns a client configuration the server accepts (its
// authority, the client certificate), or nil for a plain server. It panics
// if the files can't be read (they were written by LaunchTLS).
func (s *Server) ClientTLS() *tls.Config { return certtest.MustClientConfig(s.certs, "etcdtest") }

// scheme is the scheme of URL: etcds:// for a TLS server.
func (s *Server) scheme() string {
	if s.certs != nil {
		return "etcds"
	}
	return "etcd"
}

// httpScheme is the scheme of the server's client URLs.
func (s *Server) httpScheme() string {
	if s.certs != nil {
		return "https"
	}
	return "http"
}

// tlsFlags are the server's TLS flags: TLS on the client URLs, client
// certificates required and checked against the test authority.
func (s *Server) tlsFlags() []string {
	if s.certs == nil {
		return nil
	}
	return []string{"--cert-file", s.certs.ServerCert, "--key-file", s.certs.ServerKey,
		"--client-cert-auth", "--trusted-ca-file", s.certs.CA}
}
