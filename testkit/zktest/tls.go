package zktest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
)

// WithTLS makes every server of a local cluster serve TLS as well, on a
// port of its own (ZooKeeper's secureClientPort, Netty connection
// factory), with certificates zktest generates for the cluster: a fresh
// authority, a server certificate for 127.0.0.1, ::1 and localhost, and a
// client certificate. The servers require a client certificate signed by
// that authority (ssl.clientAuth=need). The plain client port stays open
// for zktest's own connections (readiness polls, chroots, Inspect).
// Clients find the TLS endpoints with SecureAddrs or SecureServers and the
// files with TLSFiles (a ready configuration: ClientTLS).
//
// Only zktest's local servers can be configured this way: with WithTLS,
// Start and Launch use neither ZK_TEST_SERVERS nor a container, and fail
// (ErrNoServer) when the local install has no Netty (Debian: libnetty-java).
func WithTLS() Option { return func(c *config) { c.tls = true } }

// TLSFiles names the PEM files of a cluster started WithTLS. They are
// removed with the cluster's directories (Close).
type TLSFiles struct {
	CA         string // the authority that signed the servers' and the client's certificates
	ClientCert string // a client certificate the servers accept (common name certtest.ClientName)
	ClientKey  string // its private key (PKCS#8, mode 0600)
}

// SecureAddrs returns the host:port of each server's TLS port, in server
// order (as Addrs), without chroot; nil unless the cluster was started
// WithTLS. The slice is a copy.
func (c *Cluster) SecureAddrs() []string { return append([]string(nil), c.secureAddrs...) }

// SecureServers is Servers for the TLS ports: the chroot, if any, is
// appended to the last element. Nil unless the cluster was started WithTLS.
func (c *Cluster) SecureServers() []string {
	s := c.SecureAddrs()
	if c.chroot != "" && len(s) > 0 {
		s[len(s)-1] += c.chroot
	}
	return s
}

// TLSFiles returns the cluster's certificate files; ok is false unless it
// was started WithTLS.
func (c *Cluster) TLSFiles() (f TLSFiles, ok bool) {
	if c.tls == nil {
		return TLSFiles{}, false
	}
	return TLSFiles{CA: c.tls.CA, ClientCert: c.tls.ClientCert, ClientKey: c.tls.ClientKey}, true
}

// ClientTLS returns a client configuration for the cluster's TLS ports:
// it trusts only the cluster's authority and presents the client
// certificate. It fails t unless the cluster was started WithTLS.
func (c *Cluster) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	if c.tls == nil {
		t.Fatalf("zktest: ClientTLS: the cluster was not started WithTLS")
		return nil
	}
	cfg, err := c.tls.ClientConfig()
	if err != nil {
		t.Fatalf("zktest: ClientTLS: %v", err)
	}
	return cfg
}

// launchTLS is launch for WithTLS: local servers only (see WithTLS).
func launchTLS(ctx context.Context, cfg config) (*Cluster, error) {
	c, err := startLocal(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s. WithTLS needs zktest's local servers (neither %s nor a container is tried); local install: %w",
			ErrNoServer, InstallHint, EnvServers, err)
	}
	return c, nil
}

// tlsSetup is the certificates of a local cluster started WithTLS.
type tlsSetup struct {
	certtest.Files
	keyStore string // the server's private key and certificate in one PEM file, as ZooKeeper reads it
}

// errNoNetty is the error of WithTLS on an install without Netty.
var errNoNetty = errors.New("WithTLS needs Netty's codec on the server's classpath " +
	"(Debian: sudo apt-get install -y libnetty-java; a ZooKeeper release has it in lib/)")

// newTLSSetup writes the cluster's certificates into dir/tls; nil without
// WithTLS.
func newTLSSetup(dir string, cfg config, in install) (*tlsSetup, error) {
	if !cfg.tls {
		return nil, nil
	}
	if !in.netty {
		return nil, errNoNetty
	}
	f, err := certtest.Generate(filepath.Join(dir, "tls"))
	if err != nil {
		return nil, fmt.Errorf("zktest: WithTLS: generating certificates: %w", err)
	}
	key, err := os.ReadFile(f.ServerKey)
	if err != nil {
		return nil, err
	}
	cert, err := os.ReadFile(f.ServerCert)
	if err != nil {
		return nil, err
	}
	ts := &tlsSetup{Files: f, keyStore: filepath.Join(f.Dir, "server-keystore.pem")}
	return ts, os.WriteFile(ts.keyStore, append(key, cert...), 0o600)
}

// ports is how many ports a server needs for TLS: 1, or 0 for a nil setup.
func (ts *tlsSetup) ports() int {
	if ts == nil {
		return 0
	}
	return 1
}

// secureAddrs returns the TLS address of each server (nil without TLS).
func (lc *localCluster) secureAddrs() []string {
	var out []string
	for _, nd := range lc.nodes {
		if a := nd.secureAddr(); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// writeConfig adds the TLS lines of a server whose TLS port is port to b:
// the lines docs/backends/zookeeper.md#tls shows (ZooKeeper 3.5+ turns every unknown
// zoo.cfg key into the system property "zookeeper." + key).
func (ts *tlsSetup) writeConfig(b *strings.Builder, port int) {
	fmt.Fprintf(b, "secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n", port)
	b.WriteString("serverCnxnFactory=" + nettyFactory + "\n")
	fmt.Fprintf(b, "ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n", ts.keyStore)
	fmt.Fprintf(b, "ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n", ts.CA)
	b.WriteString("ssl.clientAuth=need\n")
}

// secureAddr is nd's TLS address ("" without TLS).
func (nd *node) secureAddr() string {
	if nd.securePort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.securePort))
}

// secureListening reports whether nd's TLS port accepts connections (it
// is bound after the plain one, which waitReady polls first). A server
// without TLS has none and counts as listening.
func (nd *node) secureListening(ctx context.Context) bool {
	addr := nd.secureAddr()
	if addr == "" {
		return true
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
