package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// tlsServer is a server of one backend that requires TLS with a client
// certificate: its URL (or ZooKeeper list) and its certificates.
type tlsServer struct {
	name    string
	servers string
	ca      string
	cert    string
	key     string
}

// tlsArgs are the TLS flags for s, with another authority's file for ca
// when it is not "".
func (s tlsServer) tlsArgs(ca string) []string {
	if ca == "" {
		ca = s.ca
	}
	return []string{"--tls-ca", ca, "--tls-cert", s.cert, "--tls-key", s.key}
}

// tlsServers starts a TLS server of each backend that requires a client
// certificate: ZooKeeper (zktest.WithTLS, the servers' secureClientPort),
// etcd, PostgreSQL and Redis (their harnesses' SharedTLS). The URLs are
// plain ones (etcd://, postgres:// without ssl parameters, redis://): the
// flags alone turn TLS on.
func tlsServers(t *testing.T) []tlsServer {
	cl := zktest.Start(t, zktest.WithTLS())
	zf, _ := cl.TLSFiles()
	ec := etcdtest.SharedTLS(t)
	ef, _ := ec.TLSFiles()
	pg := pgtest.SharedTLS(t)
	pf, _ := pg.TLSFiles()
	u, err := url.Parse(pg.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = "" // sslmode, sslrootcert, sslcert, sslkey: the flags say it
	rs := redistest.SharedTLS(t)
	rf, _ := rs.TLSFiles()
	return []tlsServer{
		{"ZooKeeper", strings.Join(cl.SecureServers(), ","), zf.CA, zf.ClientCert, zf.ClientKey},
		{"etcd", "etcd://" + strings.Join(ec.Endpoints(), ",") + etcdtest.Prefix(t, ec), ef.CA, ef.ClientCert, ef.ClientKey},
		{"PostgreSQL", u.String(), pf.CA, pf.ClientCert, pf.ClientKey},
		{"Redis", "redis://" + rs.Addr() + "/0", rf.CA, rf.ClientCert, rf.ClientKey},
	}
}

// TestLockTLS: with --tls-ca, --tls-cert and --tls-key, lock runs its
// command under the lock of a server that requires TLS and a client
// certificate, on every backend; without the certificate, or trusting
// another authority, it exits 70 on every backend and says why.
func TestLockTLS(t *testing.T) {
	other, err := certtest.Generate(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tlsServers(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each backend's server of its own
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			// etcd retries a refused handshake until the connect timeout.
			lock := func(timeout string, extra ...string) *proc {
				args := append([]string{"lock", "--connect-timeout", timeout}, extra...)
				return startOn(t, s.servers, dir, append(args, lockName(t), "--", "touch", ran)...)
			}
			lock("20s", s.tlsArgs("")...).expect(0, 60*time.Second)
			if _, err := os.Stat(ran); err != nil {
				t.Fatalf("the command did not run under the lock: %v", err)
			}
			os.Remove(ran)

			start := time.Now()
			p := lock("5s", "--tls-ca", s.ca)
			p.expect(exitSoftware, 60*time.Second)
			t.Logf("without a client certificate: exit 70 after %v", time.Since(start).Round(time.Millisecond))
			if !strings.Contains(p.stderr.String(), "certificate") {
				t.Errorf("without a client certificate: the log does not say why:\n%s", p.stderr)
			}
			p = lock("5s", s.tlsArgs(other.CA)...)
			p.expect(exitSoftware, 60*time.Second)
			if !strings.Contains(p.stderr.String(), "certificate signed by unknown authority") {
				t.Errorf("trusting another authority: the log does not say why:\n%s", p.stderr)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("a command ran without a verified TLS connection")
			}
		})
	}
}

// TestZooKeeperTLSSaysWhy: ZooKeeper's refusal of a missing client
// certificate is named in the log, and inspect and elect take the TLS flags
// too.
func TestZooKeeperTLSSaysWhy(t *testing.T) {
	cl := zktest.Start(t, zktest.WithTLS())
	f, _ := cl.TLSFiles()
	servers, dir := strings.Join(cl.SecureServers(), ","), t.TempDir()
	p := startOn(t, servers, dir, "inspect", "--tls-ca", f.CA, "/cli-test")
	p.expect(exitSoftware, 60*time.Second)
	if !strings.Contains(p.stderr.String(), "refused the client certificate (none was presented)") {
		t.Errorf("the log does not say the server refused the missing certificate:\n%s", p.stderr)
	}
	tlsArgs := []string{"--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}
	startOn(t, servers, dir, append([]string{"elect", "--once", "--id", "a"}, append(tlsArgs, "/cli-test/elect", "--", "true")...)...).expect(0, 60*time.Second)
	// The election's directories are containers, which the server may
	// have removed by now: 66 (no such path) is an answer over TLS too.
	p = startOn(t, servers, dir, append([]string{"inspect"}, append(tlsArgs, "/cli-test/elect")...)...)
	if code := p.wait(60 * time.Second); code != 0 && code != exitNoNode {
		t.Fatalf("inspect over TLS exited %d, want 0 or %d; log:\n%s", code, exitNoNode, p.stderr)
	}
}

// TestTLSFlagErrors: TLS flags that cannot make a configuration are usage
// errors (64) naming the flag, before any connection.
func TestTLSFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certs, err := certtest.Generate(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not-pem")
	touch(t, notPEM)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certs.ClientCert}, "--tls-cert needs --tls-key"},
		{[]string{"--tls-key", certs.ClientKey}, "--tls-key needs --tls-cert"},
		{[]string{"--tls-ca", filepath.Join(dir, "missing")}, "--tls-ca"},
		{[]string{"--tls-ca", notPEM}, "no PEM certificate"},
		{[]string{"--tls-cert", certs.ClientCert, "--tls-key", certs.ServerKey}, "private key does not match"},
	} {
		args := append([]string{"lock"}, c.args...)
		p := startOn(t, "127.0.0.1:1", dir, append(args, "/x", "--", "true")...)
		p.expect(exitUsage, 30*time.Second)
		if !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("%q: the message does not say %q:\n%s", c.args, c.want, p.stderr)
		}
	}
}
