package etcdlock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
)

// newTLSEnv is newEnv on the shared TLS server (client certificates
// required): every connect uses WithTLS with the harness's client
// configuration, through the test's fault proxy.
func newTLSEnv(t testing.TB) *env {
	t.Helper()
	srv := etcdtest.SharedTLS(t)
	return &env{srv: srv, prefix: etcdtest.Prefix(t, srv), in: srv.Client(t),
		opts: []etcdlock.Option{etcdlock.WithTLS(srv.ClientTLS())}}
}

// TestTLSConformance runs the conformance suite's connection properties
// (locktest.RunTransport) over TLS with a client
// certificate, on a server that refuses clients without one.
func TestTLSConformance(t *testing.T) {
	t.Parallel()
	locktest.RunTransport(t, &harness{e: newTLSEnv(t)})
}

// tlsConnect opens a Session on url with opts (connect timeout 5 s) and
// closes it, returning Connect's error and how long Connect took.
func tlsConnect(t *testing.T, url string, opts ...etcdlock.Option) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	s, err := etcdlock.Connect(ctx, url, append([]etcdlock.Option{etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet),
		etcdlock.WithConnectTimeout(5 * time.Second)}, opts...)...)
	if err == nil {
		_ = s.Close()
	}
	return time.Since(start), err
}

// TestTLSRefusals: a server certificate from another authority fails
// verification at once with a typed error; a client without a certificate
// is refused; WithTLS on a plain server fails rather than talking
// plaintext; InsecureSkipVerify alone is refused; an etcd:// URL with
// WithTLS is TLS.
func TestTLSRefusals(t *testing.T) {
	srv := etcdtest.SharedTLS(t)
	url := srv.URL(etcdtest.Prefix(t, srv))
	good := srv.ClientTLS()

	other, err := certtest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := other.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	took, err := tlsConnect(t, url, etcdlock.WithTLS(wrongCA))
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) || !errors.Is(err, etcdlock.ErrUnreachable) || took > 3*time.Second {
		t.Errorf("wrong authority: took %v, err %v; want a *tls.CertificateVerificationError matching ErrUnreachable at once", took, err)
	}
	t.Logf("wrong authority: %v", err)

	took, err = tlsConnect(t, url, etcdlock.WithTLS(&tls.Config{RootCAs: good.RootCAs}))
	if !errors.Is(err, etcdlock.ErrUnreachable) || !strings.Contains(err.Error(), "certificate") || took > 3*time.Second {
		t.Errorf("no client certificate: took %v, err %v; want ErrUnreachable naming the certificate at once", took, err)
	}
	t.Logf("no client certificate: %v", err)

	_, err = tlsConnect(t, etcdtest.Shared(t).URL(""), etcdlock.WithTLS(good))
	if !errors.Is(err, etcdlock.ErrUnreachable) {
		t.Errorf("WithTLS on a plain server: err %v; want ErrUnreachable (no plaintext fallback)", err)
	}

	_, err = tlsConnect(t, url, etcdlock.WithTLS(&tls.Config{InsecureSkipVerify: true}))
	if !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("InsecureSkipVerify: err %v; want recipe.ErrBadOption", err)
	}

	if _, err := tlsConnect(t, "etcd://"+strings.TrimPrefix(url, "etcds://"), etcdlock.WithTLS(good)); err != nil {
		t.Errorf("etcd:// with WithTLS: %v", err)
	}
}
