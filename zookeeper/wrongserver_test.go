package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"go.uber.org/goleak"
)

// TestConnectWrongServer (issue 24): a server of another protocol on the
// port (a real net/http server, one that greets like SSH) fails Connect
// within connerrtest.WrongWithin, matching recipe.ErrWrongServer and
// recipe.ErrUnreachable and naming what answered; before, Connect waited
// for the whole connect timeout (10 s here) and said only that no
// handshake reply came. A wrong or a down server beside a right one does
// not stop Connect (go-zookeeper shuffles the list: three tries), and one
// that says nothing is no wrong server: it keeps the connect timeout.
func TestConnectWrongServer(t *testing.T) {
	// Not parallel: it looks for leaked goroutines in the whole process.
	right := zktest.Shared(t).Addrs()
	ctx := context.Background()
	httpAddr := connerrtest.HTTPServer(t)
	ssh := connerrtest.BannerServer(t, connerrtest.SSHBanner)
	silent := connerrtest.BannerServer(t, "")
	leaks := goleak.IgnoreCurrent() // the servers' own
	connect := func(servers ...string) func() error {
		return func() error {
			s, err := Connect(ctx, servers, WithConnectTimeout(10*time.Second))
			if err == nil {
				s.Close()
			}
			return err
		}
	}
	connerrtest.CheckWrong(t, "an HTTP server", httpAddr+" is not a ZooKeeper server: an HTTP server answered (HTTP/1.1 4", "", connect(httpAddr))
	connerrtest.CheckWrong(t, "an SSH server", "is not a ZooKeeper server: an SSH server answered (SSH-2.0-OpenSSH_9.6)", "", connect(ssh))
	connerrtest.CheckWrong(t, "two wrong servers", "an HTTP server answered", "", connect(httpAddr, ssh))

	for i := range 3 {
		start := time.Now()
		if err := connect(append([]string{httpAddr, "127.0.0.1:1"}, right...)...)(); err != nil {
			t.Fatalf("try %d: a wrong and a down server beside the right ones: %v", i, err)
		}
		took := time.Since(start)
		t.Logf("try %d: connected after %v", i, took.Round(time.Millisecond))
		if took > connerrtest.WrongWithin {
			t.Errorf("try %d: a wrong and a down server beside the right ones: connected after %v", i, took)
		}
	}

	_, err := Connect(ctx, []string{silent}, WithConnectTimeout(time.Second))
	if !errors.Is(err, recipe.ErrUnreachable) || errors.Is(err, recipe.ErrWrongServer) || !strings.Contains(err.Error(), "sent no handshake reply") {
		t.Errorf("a server that says nothing: %v, want recipe.ErrUnreachable only, at the connect timeout", err)
	}
	// go-zookeeper's Close of a failed Connect ends within about a second
	// (abandonConn).
	serverkit.Eventually(t, 10*time.Second, "the failed Connects' goroutines end", func() bool { return goleak.Find(leaks) == nil })
}
