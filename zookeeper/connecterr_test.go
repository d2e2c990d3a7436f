package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestConnectErrors: every way Connect fails over TLS matches the sentinel
// docs/backends.md's "Errors at connect" gives for it, the same on every
// backend: a refused client certificate is recipe.ErrNoPermission (and,
// as before, recipe.ErrUnreachable); a certificate not trusted, TLS at the
// plain port and nothing listening are recipe.ErrUnreachable, well within
// the connect timeout (the plain port at it: it closes the connection as a
// starting server does, so Connect retries); a TLS configuration that allows no version is
// recipe.ErrBadOption at once (it was retried until the connect timeout).
func TestConnectErrors(t *testing.T) {
	t.Parallel()
	cl := tlsServer.Get(t, zktest.WithTLS())
	secure, plain := cl.SecureAddrs()[0], cl.Addrs()[0]
	good := cl.ClientTLS(t)
	other, err := certtest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := other.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	tls11 := good.Clone()
	tls11.MaxVersion = tls.VersionTLS11
	for _, c := range []struct {
		name                     string
		addr                     string
		cfg                      *tls.Config
		perm, unreach, cert, bad bool
		says                     string
		within                   time.Duration
	}{
		{"server certificate not trusted", secure, wrongCA, false, true, true, false, "failed verification", 8 * time.Second},
		{"no client certificate", secure, &tls.Config{RootCAs: good.RootCAs}, true, true, false, false, "(none was presented)", 8 * time.Second},
		{"MaxVersion TLS 1.1", secure, tls11, false, false, false, true, "MaxVersion", time.Second},
		{"TLS to the plain port", plain, good, false, true, false, false, "is it the server's secureClientPort?", 15 * time.Second},
		{"nothing listens", "127.0.0.1:1", good, false, true, false, false, "connection refused", 8 * time.Second},
	} {
		// The plain port fails at the connect timeout, which a shorter one
		// reaches sooner; the others must fail well before theirs.
		timeout := 10 * time.Second
		if c.addr == plain {
			timeout = 3 * time.Second
		}
		start := time.Now()
		s, err := Connect(context.Background(), []string{c.addr}, WithTLS(c.cfg), WithConnectTimeout(timeout))
		took := time.Since(start)
		if err == nil {
			s.Close()
		}
		var ve *tls.CertificateVerificationError
		got := [4]bool{errors.Is(err, recipe.ErrNoPermission), errors.Is(err, recipe.ErrUnreachable), errors.As(err, &ve), errors.Is(err, recipe.ErrBadOption)}
		if want := [4]bool{c.perm, c.unreach, c.cert, c.bad}; err == nil || got != want {
			t.Errorf("%s: [ErrNoPermission ErrUnreachable *CertificateVerificationError ErrBadOption] = %v, want %v; err %v", c.name, got, want, err)
		}
		if err != nil && !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: the error does not say %q: %v", c.name, c.says, err)
		}
		if took > c.within {
			t.Errorf("%s: took %v, want at most %v", c.name, took, c.within)
		}
		t.Logf("%s (%v): %v", c.name, took.Round(time.Millisecond), err)
	}
}
