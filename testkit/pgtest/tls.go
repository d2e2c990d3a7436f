package pgtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/lazy"
)

// LaunchTLS is Launch for a server that takes TCP clients over TLS only
// (ssl=on, a server certificate for 127.0.0.1, ::1 and localhost) and only
// with a client certificate its own authority signed, whose common name is
// the user name (pg_hba.conf: hostssl ... clientcert=verify-full; no plain
// host line). The superuser is certtest.ClientName, so that the client
// certificate is the superuser's. The certificates are fresh ones
// (certtest.Generate) in the server's directory: TLSFiles names them,
// ClientTLS is a client configuration that passes, and DSN and Database
// return URLs with sslmode=verify-full and the certificate files. PG_TEST_DSN
// is not consulted: a TLS server is always started from the binaries.
func LaunchTLS(ctx context.Context) (*Server, error) {
	s, err := launch(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, InstallHint)
	}
	return s, nil
}

var sharedTLS lazy.Shared[*Server]

// SharedTLS returns the test binary's one TLS server (LaunchTLS), launched
// on first use and stopped by Main (or StopShared); tests that share it keep
// to databases of their own (Database). When none can be had the test fails
// at once, with InstallHint, and later calls fail the same way.
func SharedTLS(tb testing.TB) *Server {
	tb.Helper()
	return sharedTLS.Get(tb, "pgtest.SharedTLS", launchTLS)
}

func launchTLS() (*Server, error) { return LaunchTLS(context.Background()) }

// stopSharedTLS stops the SharedTLS server, if one was launched.
func stopSharedTLS() { sharedTLS.StopOrWarn(nil, "pgtest: stopping the TLS server") }

// TLSFiles returns the certificate files of a server of LaunchTLS, and
// false for a plain one.
func (s *Server) TLSFiles() (certtest.Files, bool) { return certtest.Held(s.certs) }

// ClientTLS returns a client configuration the server accepts (its
// authority, the client certificate), or nil for a plain server. It panics
// if the files can't be read (LaunchTLS wrote them).
func (s *Server) ClientTLS() *tls.Config { return certtest.MustClientConfig(s.certs, "pgtest") }

// superuser is the bootstrap superuser initdb creates.
func superuser(secure bool) string {
	if secure {
		return certtest.ClientName
	}
	return "postgres"
}

// hbaTLS is the whole pg_hba.conf of a TLS server: the Unix socket is
// trusted (nothing of pgtest uses it), TCP only over TLS with a verified
// client certificate whose common name is the user name.
const hbaTLS = `local all all trust
hostssl all all 127.0.0.1/32 trust clientcert=verify-full
hostssl all all ::1/128 trust clientcert=verify-full
`

// secureCluster prepares the cluster in data for TLS when secure: the
// certificates in dir/certs (owned by the server's user, which PostgreSQL
// requires of its key) and pg_hba.conf. It does nothing (nil) otherwise.
func secureCluster(dir, data string, cred *syscall.Credential, secure bool) (*certtest.Files, error) {
	f, err := certtest.GenerateIn(dir, secure)
	if f == nil || err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{f.Dir, f.CA, f.ServerCert, f.ServerKey, f.ClientCert, f.ClientKey} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hbaTLS), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		return f, os.Chown(filepath.Join(data, "pg_hba.conf"), int(cred.Uid), int(cred.Gid))
	}
	return f, nil
}

// tlsArgs are the server's TLS settings (none for a plain server).
func (s *Server) tlsArgs() []string {
	if s.certs == nil {
		return nil
	}
	return []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + s.certs.ServerCert,
		"-c", "ssl_key_file=" + s.certs.ServerKey, "-c", "ssl_ca_file=" + s.certs.CA}
}

// tlsDSN is the maintenance database's URL on a TLS server: the superuser,
// sslmode=verify-full and the certificate files.
func tlsDSN(port int, f *certtest.Files) string {
	q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {f.CA}, "sslcert": {f.ClientCert}, "sslkey": {f.ClientKey}}
	u := url.URL{Scheme: "postgres", User: url.User(certtest.ClientName), Host: fmt.Sprintf("127.0.0.1:%d", port), Path: "/postgres", RawQuery: q.Encode()}
	return u.String()
}
