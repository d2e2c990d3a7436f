package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/connerrtest"
)

// TestConnectWrongServer (issue 24): a server of another protocol at the
// endpoint (a real net/http server, one that greets like SSH) fails
// Connect within connerrtest.WrongWithin, matching recipe.ErrWrongServer,
// recipe.ErrUnreachable and etcdlock.ErrUnreachable and naming what
// answered; before, gRPC retried until the connect timeout (10 s) and the
// error said "context deadline exceeded". A wrong endpoint beside the right
// one does not stop Connect.
func TestConnectWrongServer(t *testing.T) {
	ctx := context.Background()
	httpAddr := connerrtest.HTTPServer(t)
	ssh := connerrtest.BannerServer(t, connerrtest.SSHBanner)
	connect := func(endpoints string) func() error {
		return func() error {
			s, err := etcdlock.Connect(ctx, "etcd://"+endpoints, etcdlock.WithConnectTimeout(10*time.Second))
			if err == nil {
				s.Close()
			}
			if err != nil && !errors.Is(err, etcdlock.ErrUnreachable) {
				t.Errorf("%v does not match etcdlock.ErrUnreachable", err)
			}
			return err
		}
	}
	connerrtest.CheckWrong(t, "an HTTP server", httpAddr+" is not an etcd server: an HTTP server answered (HTTP/1.1 4", "", connect(httpAddr))
	connerrtest.CheckWrong(t, "an SSH server", "is not an etcd server: an SSH server answered (SSH-2.0-OpenSSH_9.6)", "", connect(ssh))

	right := etcdtest.Shared(t).Endpoints()[0]
	start := time.Now()
	if err := connect(httpAddr + "," + right)(); err != nil {
		t.Fatalf("a wrong endpoint beside the right one: %v", err)
	}
	t.Logf("a wrong endpoint beside the right one: connected after %v", time.Since(start).Round(time.Millisecond))
	if err := connect(right)(); err != nil {
		t.Fatalf("the right server: %v", err)
	}
}
