package barrier_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/barrier"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// opCtx is a context for one step of a test: generous, so that only a
// hang fails it.
func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newDouble is barrier.NewDouble, failing t.
func newDouble(t *testing.T, s *zookeeper.Session, dir string, n int, opts ...barrier.DoubleOption) *barrier.DoubleBarrier {
	t.Helper()
	d, err := barrier.NewDouble(s, dir, n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// proxied is a Session of its own through a FaultProxy, with a tap for
// expiring its session.
type proxied struct {
	s   *zookeeper.Session
	p   *serverkit.FaultProxy
	tap *zktest.SessionTap
}

func connectProxied(t *testing.T, cl *zktest.Cluster, opts ...zookeeper.Option) proxied {
	t.Helper()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	tap := zktest.NewSessionTap()
	opts = append([]zookeeper.Option{zookeeper.WithDialer(tap.Dialer(p.Dial))}, opts...)
	return proxied{s: rtest.Connect(t, cl, opts...), p: p, tap: tap}
}

// expire ends c's ZooKeeper session at the server.
func (c proxied) expire(t *testing.T, cl *zktest.Cluster) {
	t.Helper()
	id, pw, ok := c.tap.Session()
	if !ok {
		t.Fatal("no session seen")
	}
	if _, err := zktest.ExpireSession(opCtx(t), cl.Addrs(), id, pw); err != nil {
		t.Fatal(err)
	}
}

// async runs f in a goroutine; the channel gets its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// await returns the error f's goroutine sent, failing t after a generous
// while (a hang, not a slow machine).
func await(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still blocked after 30 s", what)
		return nil
	}
}

// stillBlocked fails t if f's goroutine has returned already.
func stillBlocked(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) while it should block", what, err)
	default:
	}
}

// nodes lists the participant nodes in dir.
func nodes(in *zktest.Inspector, dir string) []string {
	var out []string
	for _, c := range in.Children(dir) {
		if strings.Contains(c, "-"+barrier.Kind) {
			out = append(out, c)
		}
	}
	return out
}

// marked reports how many of dir's participant nodes carry a mark.
func marked(t *testing.T, in *zktest.Inspector, cl *zktest.Cluster, dir string) int {
	t.Helper()
	k := 0
	for _, c := range nodes(in, dir) {
		data, _, err := in.Conn().Get(cl.Chroot() + dir + "/" + c)
		if err == nil && !strings.HasSuffix(strings.SplitN(string(data), "\n", 2)[0], " 0") {
			k++
		}
	}
	return k
}

// noNodesLeft fails t unless dir holds no participant node (eventually:
// a cleanup's delete may still be on its way).
func noNodesLeft(t *testing.T, in *zktest.Inspector, dir string) {
	t.Helper()
	serverkit.Eventually(t, 20*time.Second, "no node left in "+dir, func() bool { return len(nodes(in, dir)) == 0 })
}
