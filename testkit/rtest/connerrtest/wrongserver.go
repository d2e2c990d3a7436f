package connerrtest

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"
)

// WrongWithin bounds how long Connect may take to fail against a server of
// another protocol in the tests: it takes about half a second alone (a
// first connect given connerr.SlowAfter, then connerr.Identify), and up to
// the full connect timeout (10 s in the tests) before that mechanism; the
// margin is for a machine shared by many test runs.
const WrongWithin = 3 * time.Second

// HTTPServer starts a real net/http server that answers every request
// with 404, and returns its host:port.
func HTTPServer(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// BannerServer starts a TCP server that greets every connection with
// banner (e.g. an SSH server's "SSH-2.0-..." line; "" says nothing) and
// then keeps it open without a word until the test ends; it returns its
// host:port.
func BannerServer(t *testing.T, banner string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			_, _ = c.Write([]byte(banner))
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// SSHBanner is what an SSH server sends first.
const SSHBanner = "SSH-2.0-OpenSSH_9.6\r\n"

// CheckWrong runs connect, a Connect to a server of another protocol, and
// checks that it fails within WrongWithin with an error matching
// recipe.ErrWrongServer and recipe.ErrUnreachable that says says (what was
// found) and holds no secret (the DSN's password, if any; secrettest.AbsentErr:
// not in any text of it or of the errors it wraps, nor in their fields).
func CheckWrong(t *testing.T, name, says, secret string, connect func() error) {
	t.Helper()
	start := time.Now()
	err := connect()
	took := time.Since(start)
	if !errors.Is(err, recipe.ErrWrongServer) || !errors.Is(err, recipe.ErrUnreachable) {
		t.Errorf("%s: %v, want recipe.ErrWrongServer and recipe.ErrUnreachable", name, err)
	}
	if err != nil && !strings.Contains(err.Error(), says) {
		t.Errorf("%s: the error does not say %q: %v", name, says, err)
	}
	if secret != "" {
		secrettest.AbsentErr(t, name+": the error", err, secret)
	}
	if took > WrongWithin {
		t.Errorf("%s: took %v, want at most %v (the connect timeout before the fix)", name, took, WrongWithin)
	}
	t.Logf("%s (%v): %v", name, took.Round(time.Millisecond), err)
}

// CheckWrongServers starts a real HTTP server and one that greets like SSH
// and checks (CheckWrong) that connect, a Connect of the backend named
// backend ("a PostgreSQL", "an etcd") to the address it is given, fails on
// each as a wrong server, naming what answered and holding no secret.
func CheckWrongServers(t *testing.T, backend, secret string, connect func(addr string) error) {
	t.Helper()
	httpAddr, ssh := HTTPServer(t), BannerServer(t, SSHBanner)
	at := func(addr string) func() error { return func() error { return connect(addr) } }
	CheckWrong(t, "an HTTP server", httpAddr+" is not "+backend+" server: an HTTP server answered (HTTP/1.1 4", secret, at(httpAddr))
	CheckWrong(t, "an SSH server", "is not "+backend+" server: an SSH server answered (SSH-2.0-OpenSSH_9.6)", secret, at(ssh))
}
