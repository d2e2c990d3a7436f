package redislock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// connectCase is one row of docs/backends.md's "Errors at connect".
type connectCase = connerrtest.Case

// checkCase runs c and checks its error.
var checkCase = connerrtest.Check

// TestConnectErrors: every way Connect (or an acquisition) fails matches
// the sentinel docs/backends.md's table gives for it, the same on every
// backend: a wrong password, an unknown user, no AUTH where it is needed
// and a refused client certificate are recipe.ErrNoPermission; a server
// not reached (nothing listens, a name that does not resolve, a
// certificate not trusted, TLS against a plain port or the reverse, a
// server gone at acquisition) is recipe.ErrUnreachable; a TLS
// configuration that allows no version is recipe.ErrBadOption, at once.
func TestConnectErrors(t *testing.T) {
	srv := redistest.SharedTLS(t)
	plain := redistest.Start(t)
	good := srv.ClientTLS()
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
	// A client certificate of another authority with the server's
	// authority's name (certtest.CAName): OpenSSL finds the authority by
	// name, fails the signature and sends decrypt_error.
	sameName := &tls.Config{RootCAs: good.RootCAs, Certificates: wrongCA.Certificates}
	sameName12 := sameName.Clone()
	sameName12.MaxVersion = tls.VersionTLS12
	noCert12 := &tls.Config{RootCAs: good.RootCAs, MaxVersion: tls.VersionTLS12}
	connect := func(url string, opts ...redislock.Option) func(t *testing.T) error {
		return func(t *testing.T) error { _, err := tlsConnect(url, opts...); return err }
	}
	once := func(run func(t *testing.T) error) func(t *testing.T) error { // the refusal said once
		return func(t *testing.T) error {
			err := run(t)
			if err != nil && strings.Count(err.Error(), "refused the client certificate") != 1 {
				t.Errorf("want the refusal said once: %v", err)
			}
			return err
		}
	}
	as := func(user, password string) string {
		u, err := url.Parse(aclUser(t, plain, "errtypes-user", ""))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		return u.String()
	}
	off := defaultUserOff(t)
	for _, c := range []connectCase{
		{Name: "server certificate not trusted", Run: connect(srv.URL(), redislock.WithTLS(wrongCA)), Unreach: true, Cert: true, Says: "failed verification", Within: 3 * time.Second},
		{Name: "no client certificate", Run: connect(srv.URL(), redislock.WithTLS(&tls.Config{RootCAs: good.RootCAs})), Perm: true, Unreach: true, Says: "refused the client certificate (none was presented)", Within: 3 * time.Second},
		{Name: "no client certificate, TLS 1.2", Run: once(connect(srv.URL(), redislock.WithTLS(noCert12))), Perm: true, Unreach: true, Says: "refused the client certificate (none was presented)", Within: 3 * time.Second},
		{Name: "client certificate of another CA of the same name", Run: once(connect(srv.URL(), redislock.WithTLS(sameName))), Perm: true, Unreach: true, Says: "refused the client certificate: ", Within: 3 * time.Second},
		{Name: "client certificate of another CA of the same name, TLS 1.2", Run: once(connect(srv.URL(), redislock.WithTLS(sameName12))), Perm: true, Unreach: true, Says: "refused the client certificate: ", Within: 3 * time.Second},
		{Name: "MaxVersion TLS 1.1", Run: connect(srv.URL(), redislock.WithTLS(tls11)), Bad: true, Says: "MaxVersion", Within: time.Second},
		{Name: "plaintext to the TLS port", Run: connect("redis://" + srv.Addr() + "/0"), Unreach: true, Says: "use rediss:// or WithTLS", Within: 3 * time.Second},
		{Name: "TLS to a plaintext port", Run: connect("rediss://"+plain.Addr()+"/0?dial_timeout=1s", redislock.WithTLS(good)), Unreach: true, Says: "is it the server's tls-port?"},
		{Name: "TLS to a plaintext port, connect deadline first", Run: func(t *testing.T) error {
			return within(time.Second, "rediss://"+plain.Addr()+"/0", redislock.WithTLS(good))
		}, Unreach: true, Says: "is it the server's tls-port?", Prefix: "recipe: connect: server unreachable: ", Within: 3 * time.Second},
		{Name: "nothing listens", Run: connect("redis://127.0.0.1:1/0"), Unreach: true, Says: "connection refused", Within: 3 * time.Second},
		{Name: "a name that does not resolve", Run: connect("redis://no-such-host.invalid:6379/0"), Unreach: true, Says: "no-such-host.invalid"},
		{Name: "wrong password", Run: connect(as("errtypes-user", "wrong-pw")), Perm: true, Says: "WRONGPASS", Prefix: connerrtest.RefusedWords, Within: 3 * time.Second},
		{Name: "unknown user", Run: connect(as("no-such-user", "wrong-pw")), Perm: true, Says: "WRONGPASS", Prefix: connerrtest.RefusedWords, Within: 3 * time.Second},
		{Name: "no AUTH where the default user is off", Run: connect(off.URL(), redislock.WithTLS(off.ClientTLS())), Perm: true, Says: "NOAUTH", Prefix: connerrtest.RefusedWords, Within: 3 * time.Second},
		{Name: "server gone at acquisition", Run: goneAtAcquire, Unreach: true, Says: "connection refused"},
	} {
		checkCase(t, c)
	}
}

// within connects with a context that ends after d (before the dial
// timeout, 5 s by default).
func within(d time.Duration, url string, opts ...redislock.Option) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	s, err := redislock.Connect(ctx, url, opts...)
	if err == nil {
		_ = s.Close()
	}
	return err
}

// defaultUserOff starts a TLS server of its own whose default user is off,
// before the case that connects to it without credentials is timed.
func defaultUserOff(t *testing.T) *redistest.Server {
	srv, err := redistest.LaunchTLS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Client(t).Do(context.Background(), "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// goneAtAcquire connects through a listener of its own that forwards to a
// server, closes the listener and the connections, and returns the error
// of a TryAcquire then.
func goneAtAcquire(t *testing.T) error {
	srv := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go pipe(c, s)
			go pipe(s, c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gs, err := redislock.Connect(ctx, "redis://"+ln.Addr().String()+"/0", redislock.WithKeyPrefix(srv.KeyPrefix()), redislock.WithTTL(confTTL),
		redislock.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	ln.Close()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	_, err = mustNew(t, gs, "gone").TryAcquire(ctx)
	return err
}

// pipe copies from src to dst until either ends.
func pipe(dst, src net.Conn) {
	b := make([]byte, 4096)
	for {
		n, err := src.Read(b)
		if n > 0 {
			if _, werr := dst.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// TestGoRedisLogs: go-redis's own log lines (here: a failed dial) go to
// the Session's logger at DEBUG, scrubbed of the Session's password, not
// to stderr. Before, go-redis printed them on stderr through the standard
// logger, past WithLogger.
func TestGoRedisLogs(t *testing.T) {
	const pw = "go-redis-log-pw"
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dial := func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no route for the password " + pw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := redislock.Connect(ctx, "redis://user:"+pw+"@127.0.0.1:1/0", redislock.WithLogger(log), redislock.WithDialer(dial))
	if err == nil {
		t.Fatal("Connect succeeded")
	}
	out := buf.String()
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "failed to dial") {
		t.Errorf("go-redis's failed dial did not reach WithLogger at DEBUG:\n%s", out)
	}
	if strings.Contains(out, pw) || strings.Contains(err.Error(), pw) {
		t.Errorf("the password is in the log or the error:\n%s\n%v", out, err)
	}
	t.Logf("log:\n%s", out)
}
