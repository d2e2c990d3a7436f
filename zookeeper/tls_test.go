package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// tlsServer is the server started WithTLS (client certificate required)
// that TestTLS and TestConnectErrors share: neither changes it.
var tlsServer OnceCluster

// TestTLS runs against one server started WithTLS (client certificate
// required): a Session with the cluster's client configuration works, the
// certificate is checked for the host name as given; a server whose
// certificate another authority signed, a client without a certificate
// and a TLS client at the plain port all fail fast with a typed error.
// The cases are independent connections: they run in parallel.
func TestTLS(t *testing.T) {
	t.Parallel()
	cl := tlsServer.Get(t, zktest.WithTLS())
	secure := cl.SecureAddrs()[0]
	_, port, _ := net.SplitHostPort(secure)

	t.Run("ClientCertificate", func(t *testing.T) {
		t.Parallel()
		s := connectTLS(t, []string{secure}, cl.ClientTLS(t))
		// Ephemeral: the server is shared, and outlives the test under -count.
		if _, err := s.Conn().Create("/tls", []byte("x"), zk.FlagEphemeral, s.cfg.acl); err != nil {
			t.Fatalf("create over TLS: %v", err)
		}
	})
	t.Run("ServerNameFromTheEntry", func(t *testing.T) {
		t.Parallel()
		cfg := cl.ClientTLS(t)
		var mu sync.Mutex
		var names []string
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			mu.Lock()
			defer mu.Unlock()
			names = append(names, cs.ServerName)
			return nil
		}
		connectTLS(t, []string{net.JoinHostPort("localhost", port)}, cfg)
		mu.Lock()
		defer mu.Unlock()
		if len(names) == 0 || names[0] != "localhost" {
			t.Fatalf("server names verified: %q, want localhost (the entry's host, not its address)", names)
		}
	})
	t.Run("WrongAuthority", func(t *testing.T) {
		t.Parallel()
		other, err := certtest.Generate(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := other.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		err = connectFails(t, secure, cfg)
		var verr *tls.CertificateVerificationError
		if !errors.As(err, &verr) || !errors.Is(err, recipe.ErrUnreachable) {
			t.Fatalf("Connect trusting another authority: %v, want a *tls.CertificateVerificationError and recipe.ErrUnreachable", err)
		}
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		t.Parallel()
		cfg := cl.ClientTLS(t)
		cfg.Certificates = nil
		err := connectFails(t, secure, cfg)
		if !errors.Is(err, recipe.ErrNoPermission) || !strings.Contains(err.Error(), "none was presented") {
			t.Fatalf("Connect without a client certificate: %v, want recipe.ErrNoPermission saying none was presented", err)
		}
	})
	t.Run("PlainPort", func(t *testing.T) {
		t.Parallel()
		// The server closes the connection, as a starting one does: Connect
		// retries until its timeout, and then names the likely cause.
		s, err := Connect(context.Background(), cl.Addrs(), WithTLS(cl.ClientTLS(t)), WithConnectTimeout(3*time.Second))
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, recipe.ErrUnreachable) || !strings.Contains(fmt.Sprint(err), "is it the server's secureClientPort?") {
			t.Fatalf("Connect with TLS to the plain port: %v, want recipe.ErrUnreachable asking for the secureClientPort", err)
		}
	})
}

// connectTLS connects a Session over TLS, closed at cleanup.
func connectTLS(t *testing.T, servers []string, cfg *tls.Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Connect(ctx, servers, WithTLS(cfg))
	if err != nil {
		t.Fatalf("Connect over TLS: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// connectFails returns Connect's error with cfg, and fails t unless
// Connect fails well within its connect timeout (a minute): a rejected
// handshake is not retried until then.
func connectFails(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	start := time.Now()
	s, err := Connect(context.Background(), []string{addr}, WithTLS(cfg), WithConnectTimeout(time.Minute))
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Connect took %v to fail (connect timeout 1m): %v", d, err)
	}
	t.Logf("Connect: %v", err)
	return err
}

// TestTLSOptions: InsecureSkipVerify is refused unless a callback
// verifies instead; MinVersion is raised to TLS 1.2; the caller's
// configuration is not changed.
func TestTLSOptions(t *testing.T) {
	_, err := buildConfig([]Option{WithTLS(&tls.Config{InsecureSkipVerify: true})})
	if !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("InsecureSkipVerify: %v, want recipe.ErrBadOption", err)
	}
	if _, err := Connect(context.Background(), []string{"127.0.0.1:1"}, WithTLS(&tls.Config{InsecureSkipVerify: true})); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("Connect with InsecureSkipVerify: %v, want recipe.ErrBadOption", err)
	}
	own := &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(tls.ConnectionState) error { return nil }, MinVersion: tls.VersionTLS10}
	c, err := buildConfig([]Option{WithTLS(own)})
	if err != nil {
		t.Fatalf("InsecureSkipVerify with VerifyConnection: %v", err)
	}
	if c.tls == own || c.tls.MinVersion != tls.VersionTLS12 || own.MinVersion != tls.VersionTLS10 {
		t.Fatalf("the Session's configuration is not a clone with MinVersion TLS 1.2 (got %x, caller's now %x)", c.tls.MinVersion, own.MinVersion)
	}
	if c, err := buildConfig([]Option{WithTLS(nil)}); err != nil || c.tls == nil {
		t.Fatalf("WithTLS(nil): %v, tls %v: want TLS with the defaults", err, c.tls)
	}
}
