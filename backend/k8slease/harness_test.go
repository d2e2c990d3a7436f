package k8slease_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// testDuration is the lease duration of the tests' sessions: a holder
// renews every 500 ms and gives up 2 s after the send of its newest
// acknowledged renewal; a contender takes over 3 s after it saw the last
// change.
const testDuration = 3 * time.Second

// quiet discards the sessions' logs: the tests check outcomes, and lease
// losses are expected in most of them.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one test's view of the shared cluster: a namespace of its own and
// an admin client that no fault proxy stands in front of.
type env struct {
	c  *k8stest.Cluster
	ns string
	in kubernetes.Interface
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return envOn(t, k8stest.Shared(t))
}

// envOn is an env on the cluster c (a test's own, for process faults).
func envOn(t testing.TB, c *k8stest.Cluster) *env {
	t.Helper()
	return &env{c: c, ns: k8stest.Namespace(t, c), in: c.Client(t)}
}

// connect opens a Session of user (closed at cleanup) in the env's
// namespace through its own FaultProxy, which it returns.
func (e *env) connect(t testing.TB, user string, opts ...k8slease.Option) (*k8slease.Session, *serverkit.FaultProxy) {
	t.Helper()
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close) // after the Session's Close (cleanups run last-in first-out)
	cfg, err := e.c.ProxiedConfig(p, user)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]k8slease.Option{k8slease.WithLeaseDuration(testDuration), k8slease.WithLogger(quiet), k8slease.WithNamespace(e.ns)}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := k8slease.Connect(ctx, cfg, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// mutex returns the lock named name on s, failing the test on an error.
func mutex(t testing.TB, s *k8slease.Session, name string) *k8slease.Mutex {
	t.Helper()
	m, err := k8slease.New(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// get reads the Lease name of the env's namespace through the admin
// client (nil if it does not exist).
func (e *env) get(ctx context.Context, name string) (*coordv1.Lease, error) {
	l, err := e.in.CoordinationV1().Leases(e.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// holder returns the holderIdentity of the Lease name ("" for none).
func (e *env) holder(ctx context.Context, name string) (string, error) {
	l, err := e.get(ctx, name)
	if err != nil || l == nil || l.Spec.HolderIdentity == nil {
		return "", err
	}
	return *l.Spec.HolderIdentity, nil
}

// harness is the locktest.Harness of k8slease: every client has its own
// Session through its own FaultProxy.
type harness struct{ e *env }

func (h *harness) NewClient(tb testing.TB, lock string) locktest.Client {
	tb.Helper()
	s, p := h.e.connect(tb, k8stest.AdminUser)
	return &lockClient{Mutex: mutex(tb, s, lock), p: p}
}

// Leftovers is 1 while the Lease names a holder, else 0: a Lease cannot
// queue, and a released one stays, with no holder.
func (h *harness) Leftovers(ctx context.Context, lock string) (int, error) {
	who, err := h.e.holder(ctx, lock)
	if err != nil || who == "" {
		return 0, err
	}
	return 1, nil
}

// LeaseTime: a crashed holder's last renewal was sent at most D/6 (plus a
// round trip) before the crash, and a waiter takes over a full D after it
// saw it, so the lock is freed between 5/6 D and D (plus the waiter's
// timer and one write) after the crash. Min is half of D; Max leaves 5 s of
// slack for a loaded 2-core machine.
func (h *harness) LeaseTime() locktest.LeaseTime {
	return locktest.LeaseTime{Min: testDuration / 2, Max: testDuration + 5*time.Second}
}

// lockClient is a lock on its own Session, behind its own FaultProxy.
type lockClient struct {
	*k8slease.Mutex
	p *serverkit.FaultProxy
}

// Crash models a killed process: closing the proxy closes the client's
// connections and makes every later dial fail, so nothing more reaches the
// API server; a contender takes the Lease over one duration after it saw
// the last renewal.
func (c *lockClient) Crash() { c.p.Close() }

// CutOff is a network partition: connections stay open, nothing is
// forwarded either way.
func (c *lockClient) CutOff() { c.p.Blackhole() }

// Heal ends the partition; the client's connections are closed and it
// dials again.
func (c *lockClient) Heal() { c.p.Resume() }
