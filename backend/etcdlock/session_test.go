package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

func TestConnectBadURL(t *testing.T) {
	for _, u := range []string{
		"", "127.0.0.1:2379", "http://127.0.0.1:2379", "etcd://", "etcd://h", "etcd://h:0", "etcd://h:65536",
		"etcd://h:x", "etcd://:2379", "etcd://h:2379,", "etcd://h:2379?x=1", "etcd://h:2379#f",
		"etcd://user:pw@h:2379", "etcd://h:2379/a\x01b", "etcd://h:2379/a\xffb",
	} {
		start := time.Now()
		s, err := etcdlock.Connect(context.Background(), u)
		if err == nil {
			s.Close()
			t.Errorf("Connect(%q) succeeded", u)
			continue
		}
		if !errors.Is(err, etcdlock.ErrBadURL) {
			t.Errorf("Connect(%q): %v, want an error matching ErrBadURL", u, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Connect(%q) took %v to refuse a bad URL", u, d)
		}
	}
}

func TestConnectBadOptions(t *testing.T) {
	e := newEnv(t)
	for name, o := range map[string]etcdlock.Option{
		"WithTTL(1.5s)":            etcdlock.WithTTL(1500 * time.Millisecond),
		"WithTTL(0)":               etcdlock.WithTTL(0),
		"WithTTL(5e9s)":            etcdlock.WithTTL(5e9 * time.Second), // past 2^31-1 s: the deadlines would overflow
		"WithPrefix(x)":            etcdlock.WithPrefix("x"),
		"WithPrefix(/x/)":          etcdlock.WithPrefix("/x/"),
		"WithConnectTimeout(0)":    etcdlock.WithConnectTimeout(0),
		"WithCleanupTimeout(-1ns)": etcdlock.WithCleanupTimeout(-1),
	} {
		s, err := etcdlock.Connect(context.Background(), e.srv.URL(e.prefix), o)
		if err == nil {
			s.Close()
			t.Errorf("%s accepted", name)
		} else if !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: %v, want an error matching recipe.ErrBadOption", name, err)
		}
	}
}

// An endpoint that refuses connections fails Connect at once (not after the
// connect timeout) with the dial error; one that never answers fails it at
// the connect timeout; a cancelled context fails it with its cause.
func TestConnectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = etcdlock.Connect(context.Background(), "etcd://"+refusing, etcdlock.WithConnectTimeout(time.Minute))
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, etcdlock.ErrUnreachable) || !errors.Is(err, recipe.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Connect to a refusing endpoint: %v, want an error matching ErrUnreachable, recipe.ErrUnreachable and ECONNREFUSED", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Connect to a refusing endpoint took %v", d)
	}

	e := newEnv(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	p.Blackhole()
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return p.Dial("tcp", addr, time.Second) }
	start = time.Now()
	_, err = etcdlock.Connect(context.Background(), e.srv.URL(e.prefix), etcdlock.WithDialer(dial), etcdlock.WithConnectTimeout(time.Second))
	t.Logf("silent server: failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, etcdlock.ErrUnreachable) {
		t.Errorf("Connect to a server that never answers: %v, want an error matching ErrUnreachable", err)
	}

	giveUp := errors.New("gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(giveUp)
	if _, err := etcdlock.Connect(ctx, e.srv.URL(e.prefix)); !errors.Is(err, giveUp) {
		t.Errorf("Connect with a cancelled context: %v, want its cause", err)
	}
}

// NewSession works on a client the caller configured and does not close it;
// options that only Connect uses are refused.
func TestNewSession(t *testing.T) {
	e := newEnv(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.srv.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	dial := etcdlock.WithDialer(func(ctx context.Context, addr string) (net.Conn, error) { return nil, errors.New("unused") })
	if _, err := etcdlock.NewSession(opCtx(t), cli, dial); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewSession with WithDialer: %v, want recipe.ErrBadOption", err)
	}
	if _, err := etcdlock.NewSession(opCtx(t), nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewSession with a nil client: %v, want recipe.ErrBadOption", err)
	}
	s, err := etcdlock.NewSession(opCtx(t), cli, etcdlock.WithPrefix(e.prefix), etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if s.Prefix() != e.prefix || s.TTL() != testTTL || s.Client() != cli {
		t.Errorf("prefix %q, TTL %v, client %p; want %q, %v, %p", s.Prefix(), s.TTL(), s.Client(), e.prefix, testTTL, cli)
	}
	l, err := mutex(t, s, "new-session").Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := cli.Get(opCtx(t), "x"); err != nil {
		t.Errorf("the caller's client after Session.Close: %v", err)
	}
}

// Close ends live leases (ErrSessionClosed) and waiting acquisitions, and
// revokes the etcd lease, so the Session's keys are gone when it returns.
func TestCloseEndsEverything(t *testing.T) {
	e := newEnv(t)
	s, _ := e.connect(t)
	m := mutex(t, s, "close")
	l, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ch := acquireAsync(opCtx(t), m)
	e.expectKeys(t, "close", 2, "holder and waiter")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, recipe.ErrSessionClosed) {
		t.Errorf("the holder's cause after Close: %v, want recipe.ErrSessionClosed", cause)
	}
	if r := await(t, ch, 5*time.Second, "the waiter"); !errors.Is(r.err, recipe.ErrSessionClosed) {
		t.Errorf("the waiter after Close: %v, want recipe.ErrSessionClosed", r.err)
	}
	if n, err := e.keys(opCtx(t), "close"); err != nil || n != 0 {
		t.Errorf("%d keys right after Close (%v), want 0: the revoke deletes them", n, err)
	}
	if err := l.Release(opCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release after Close: %v, want recipe.ErrLeaseLost", err)
	}
	if _, err := m.Acquire(opCtx(t)); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Acquire after Close: %v, want recipe.ErrSessionClosed", err)
	}
	if _, err := m.TryAcquire(opCtx(t)); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("TryAcquire after Close: %v, want recipe.ErrSessionClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// After its lease is lost, a Session grants a new one at the next
// acquisition; Done follows the newest lease.
func TestSessionRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, p := e.connect(t)
	m := mutex(t, s, "recover")
	old, done := s.ID(), s.Done()
	l, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	select {
	case <-done:
	case <-time.After(2 * testTTL):
		t.Fatal("Done not closed after the cut")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, recipe.ErrSuspended) {
		t.Errorf("the holder's cause after the cut: %v, want recipe.ErrSuspended", cause)
	}
	p.Resume()
	l2, err := m.Acquire(opCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() == old {
		t.Errorf("the same etcd lease %x after its loss", old)
	}
	select {
	case <-s.Done():
		t.Error("Done of the new lease is closed")
	default:
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %v after %v", l2.Token(), l.Token())
	}
	if err := l.Release(opCtx(t)); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("Release of the lost lease: %v, want recipe.ErrLeaseLost", err)
	}
	if err := l2.Release(opCtx(t)); err != nil {
		t.Fatal(err)
	}
	e.expectKeys(t, "recover", 0, "the lost lease's key was revoked or expired; the new one released")
}
