package connerr

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// TestIdentify: against real listeners, Identify names an HTTP server by
// its status line and an SSH server by its greeting, and a server that
// says nothing is Unknown within its bounds; the lock services are named
// by the backends' tests against the real servers.
func TestIdentify(t *testing.T) {
	for _, c := range []struct {
		addr string
		want Protocol
		says string
	}{
		{connerrtest.HTTPServer(t), HTTP, "an HTTP server answered (HTTP/1.1 4"},
		{connerrtest.BannerServer(t, connerrtest.SSHBanner), SSH, "an SSH server answered (SSH-2.0-OpenSSH_9.6)"},
		{connerrtest.BannerServer(t, ""), Unknown, "no server"},
	} {
		start := time.Now()
		f := Identify(context.Background(), TCP(c.addr, nil).Dial, Redis)
		if f.Protocol != c.want || !strings.HasPrefix(f.String(), c.says) {
			t.Errorf("%s: %+v (%s), want %s", c.addr, f, f, c.want)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: took %v", c.addr, took)
		}
	}
}

// TestWrongServerError: the error matches both sentinels and names each
// address with what answered there.
func TestWrongServerError(t *testing.T) {
	err := error(&WrongServerError{Want: PostgreSQL, Addrs: []string{"h:1"}, Found: []Found{{HTTP, "HTTP/1.1 400 Bad Request"}}})
	if !errors.Is(err, recipe.ErrWrongServer) || !errors.Is(err, recipe.ErrUnreachable) || errors.Is(err, recipe.ErrNoPermission) {
		t.Errorf("%v: wrong sentinels", err)
	}
	if want := "h:1 is not a PostgreSQL server: an HTTP server answered (HTTP/1.1 400 Bad Request)"; err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
	if Wrong(Found{Protocol: TLS}, Etcd) || Wrong(Found{}, Etcd) || Wrong(Found{Protocol: Etcd}, Etcd) || !Wrong(Found{Protocol: Redis}, Etcd) {
		t.Error("Wrong")
	}
}
