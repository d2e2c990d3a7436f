package etcdtest

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/certtest"
)

// LaunchTLS starts a local server that serves its clients TLS only
// (https://, server certificate for 127.0.0.1, ::1 and localhost) and
// refuses a client without a certificate signed by its own authority
// (--client-cert-auth). The certificates are fresh ones (certtest.Generate)
// in the server's directory: TLSFiles names them, ClientTLS is a client
// configuration that passes. ETCD_TEST_ENDPOINTS is not consulted: a TLS
// server is always started from the binary. The caller must Close it.
func LaunchTLS(ctx context.Context) (*Server, error) { return launchLocal(ctx, true) }

var sharedTLS struct {
	mu  sync.Mutex
	s   *Server
	err error
}

// SharedTLS is Shared for a TLS server (LaunchTLS): one for the whole test
// binary, launched on first use and stopped by Main (or StopShared).
func SharedTLS(tb testing.TB) *Server {
	tb.Helper()
	sharedTLS.mu.Lock()
	defer sharedTLS.mu.Unlock()
	if sharedTLS.s == nil && sharedTLS.err == nil {
		sharedTLS.s, sharedTLS.err = LaunchTLS(context.Background())
	}
	if sharedTLS.err != nil {
		tb.Fatalf("etcdtest.SharedTLS: %v", sharedTLS.err)
	}
	return sharedTLS.s
}

// stopSharedTLS stops the SharedTLS server, if one was launched (StopShared).
func stopSharedTLS() {
	sharedTLS.mu.Lock()
	defer sharedTLS.mu.Unlock()
	if sharedTLS.s != nil {
		_ = sharedTLS.s.Close()
	}
	sharedTLS.s, sharedTLS.err = nil, nil
}

// TLSFiles returns the certificate files of a server of LaunchTLS, and
// false for a plain one.
func (s *Server) TLSFiles() (certtest.Files, bool) {
	if s.certs == nil {
		return certtest.Files{}, false
	}
	return *s.certs, true
}

// ClientTLS returns a client configuration the server accepts (its
// authority, the client certificate), or nil for a plain server. It panics
// if the files can't be read (they were written by LaunchTLS).
func (s *Server) ClientTLS() *tls.Config { return s.clientTLS() }

func (s *Server) clientTLS() *tls.Config {
	if s.certs == nil {
		return nil
	}
	c, err := s.certs.ClientConfig()
	if err != nil {
		panic("etcdtest: " + err.Error())
	}
	return c
}

// generateCerts writes the certificates of a TLS server into dir/certs, or
// does nothing (nil) for a plain one.
func generateCerts(dir string, secure bool) (*certtest.Files, error) {
	if !secure {
		return nil, nil
	}
	f, err := certtest.Generate(filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	return &f, nil
}

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
