package redislock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestTLSConformance runs the conformance suite's connection properties
// (locktest.RunTransport) over TLS with a client
// certificate, on the shared TLS server (client certificates required),
// every client through its own fault proxy (WithDialer: the TLS runs over
// the proxy's connection).
func TestTLSConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.SharedTLS(t)
	opts := []redislock.Option{redislock.WithTLS(srv.ClientTLS())}
	h := &harness{srv: srv, in: connect(t, srv, nil, opts...), rdb: srv.Client(t), opts: opts}
	locktest.RunTransport(t, h)
}

// tlsConnect connects to url with opts and a short dial timeout, closing
// the Session at once; it returns Connect's error and how long it took.
func tlsConnect(url string, opts ...redislock.Option) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	s, err := redislock.Connect(ctx, url, opts...)
	if err == nil {
		_ = s.Close()
	}
	return time.Since(start), err
}

// TestTLSRefusals: a server certificate from another authority fails
// verification with a typed error; a client without a certificate is
// refused; WithTLS on a plain server fails rather than talking plaintext;
// InsecureSkipVerify alone is refused; a redis:// URL with WithTLS is TLS,
// WithDialer included.
func TestTLSRefusals(t *testing.T) {
	srv := redistest.SharedTLS(t)
	good := srv.ClientTLS()
	other, err := certtest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := other.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	took, err := tlsConnect(srv.URL(), redislock.WithTLS(wrongCA))
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) || took > 3*time.Second {
		t.Errorf("wrong authority: took %v, err %v; want a *tls.CertificateVerificationError at once", took, err)
	}
	t.Logf("wrong authority: %v", err)

	_, err = tlsConnect(srv.URL(), redislock.WithTLS(&tls.Config{RootCAs: good.RootCAs}))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("no client certificate: err %v; want a refusal naming the certificate", err)
	}
	t.Logf("no client certificate: %v", err)

	plain := redistest.Start(t)
	if took, err := tlsConnect(plain.URL()+"?dial_timeout=1s", redislock.WithTLS(good)); err == nil {
		t.Error("WithTLS on a plain server: connected (plaintext?)")
	} else {
		t.Logf("plain server: %v %v", took, err)
	}

	if _, err := tlsConnect(srv.URL(), redislock.WithTLS(&tls.Config{InsecureSkipVerify: true})); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("InsecureSkipVerify: err %v; want recipe.ErrBadOption", err)
	}

	p := serverkit.NewFaultProxy()
	defer p.Close()
	asPlain := "redis://" + srv.Addr() + "/0"
	if _, err := tlsConnect(asPlain, redislock.WithTLS(good), redislock.WithDialer(p.DialContext)); err != nil {
		t.Errorf("redis:// with WithTLS and WithDialer: %v", err)
	}
}

// TestTLSDialerKeepsRediss: a rediss:// URL with WithDialer speaks TLS (go-redis
// alone applies its TLS only in its own dialer, so the custom one talked
// plaintext to the TLS port).
func TestTLSDialerKeepsRediss(t *testing.T) {
	srv := redistest.SharedTLS(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	// rediss:// alone uses the system's roots, which don't hold the test
	// authority: the handshake must happen, and fail verification.
	_, err := tlsConnect(srv.URL(), redislock.WithDialer(p.DialContext))
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) {
		t.Errorf("rediss:// with WithDialer: err %v; want a *tls.CertificateVerificationError (TLS attempted)", err)
	}
}
