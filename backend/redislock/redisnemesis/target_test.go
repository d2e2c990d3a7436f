package redisnemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// fixture is a Target on its own server, prepared under base "/t".
type fixture struct {
	t   *testing.T
	srv *redistest.Server
	tgt *Target
}

func newFixture(t *testing.T) *fixture {
	srv, tgt := ownTarget(t)
	if err := tgt.Prepare(context.Background(), "/t"); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, srv: srv, tgt: tgt}
}

// ownTarget starts a server of the test's own (never REDIS_TEST_ADDR's:
// the faults kill it) and returns it with its Target, both closed at the
// test's cleanup.
func ownTarget(t *testing.T) (*redistest.Server, *Target) {
	t.Helper()
	srv, err := redistest.LaunchLocal(context.Background(), redistest.WithDebugCommand())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the server: %v", err)
		}
	})
	tgt, err := NewTarget(srv, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tgt.Close() })
	return srv, tgt
}

// lock connects client i through a proxy of its own and returns its lock on
// "/t/lock" (client and proxy closed at the test's cleanup).
func (fx *fixture) lock(i int) (recipe.Lock, nemesis.Client) {
	p := serverkit.NewFaultProxy()
	fx.t.Cleanup(p.Close)
	c, err := fx.tgt.Connect(context.Background(), i, p)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(func() { _ = c.Close() })
	l, err := c.Lock("/t/lock")
	if err != nil {
		fx.t.Fatal(err)
	}
	return l, c
}

// inject runs the target's fault kind name as the engine would.
func (fx *fixture) inject(name string, client int, d time.Duration) nemesis.Fault {
	for _, k := range fx.tgt.Faults() {
		if k.Name == name {
			f := nemesis.Fault{Kind: name, Client: client}
			k.Inject(context.Background(), &f, d, rand.New(rand.NewPCG(1, 2)))
			return f
		}
	}
	fx.t.Fatalf("no fault kind %q", name)
	return nemesis.Fault{}
}

func acquire(t *testing.T, l recipe.Lock, within time.Duration) recipe.Lease {
	t.Helper()
	lease, err := tryAcquire(l, within)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return lease
}

// tryAcquire calls Acquire until it succeeds or within has passed.
func tryAcquire(l recipe.Lock, within time.Duration) (recipe.Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		lease, err := l.Acquire(ctx)
		if err == nil || ctx.Err() != nil {
			return lease, err
		}
		time.Sleep(20 * time.Millisecond) // a connection that died with the server
	}
}

// TestFaultsOnAHolderAndAWaiter: client-kill closes a holder's and a
// waiter's connections (the waiter's pub/sub one included) without taking
// the lock from anyone; delete-key is a certain revocation whose Below is
// above the holder's token, and the holder's lease ends at its next
// renewal; the server faults shorter than the holder's 2/3·T leave its
// lease live. At the end nothing is left over.
func TestFaultsOnAHolderAndAWaiter(t *testing.T) {
	fx := newFixture(t)
	la, ca := fx.lock(0)
	lb, cb := fx.lock(1)
	a := acquire(t, la, 5*time.Second)
	got := make(chan recipe.Lease, 1)
	go func() {
		l, err := tryAcquire(lb, 20*time.Second)
		if err != nil {
			t.Errorf("b: Acquire: %v", err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond) // b waits, subscribed

	for i := range 2 {
		if f := fx.inject(FaultClientKill, i, 0); f.Err != "" || f.Revokes {
			t.Fatalf("client-kill %d: %+v", i, f)
		}
	}
	time.Sleep(fx.tgt.SessionTimeout()) // three renewals, on new connections
	if err := a.Context().Err(); err != nil {
		t.Fatalf("a's lease ended after client-kill: %v", context.Cause(a.Context()))
	}
	f := fx.inject(FaultDeleteKey, -1, 0)
	if !f.Revokes || !f.Certain || f.Below != a.Token()+1 || f.Err != "" {
		t.Fatalf("delete-key: %+v; want a certain revocation with Below %d", f, a.Token()+1)
	}
	select {
	case <-a.Context().Done():
		if !errors.Is(context.Cause(a.Context()), recipe.ErrNodeDeleted) {
			t.Errorf("a's lease ended with %v, want ErrNodeDeleted", context.Cause(a.Context()))
		}
	case <-time.After(fx.tgt.SessionTimeout() / 2):
		t.Fatal("a's lease still live T/2 after its key was deleted")
	}
	b := <-got
	if b == nil {
		t.FailNow()
	}
	if b.Token() <= a.Token() {
		t.Errorf("b's token %d not above a's %d", b.Token(), a.Token())
	}
	_ = a.Release(context.Background())

	for _, kind := range []string{FaultKillServer, FaultPauseServer, FaultSleepServer} {
		if f := fx.inject(kind, -1, 300*time.Millisecond); f.Err != "" {
			t.Fatalf("%s: %s", kind, f.Err)
		}
		if err := fx.tgt.Heal(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(fx.tgt.SessionTimeout() / 2) // a renewal after the fault
		if err := b.Context().Err(); err != nil {
			t.Fatalf("b's lease ended after a %s of 300 ms: %v", kind, context.Cause(b.Context()))
		}
	}
	if err := b.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	fx.checkClean(ca, cb)
}

// checkClean checks that, the test's clients having released everything,
// Leftovers lists only their connections (the token counter is expected),
// at least one, and once they are closed, nothing.
func (fx *fixture) checkClean(clients ...nemesis.Client) {
	left, err := fx.tgt.Leftovers(context.Background())
	if err != nil {
		fx.t.Fatal(err)
	}
	conns := 0
	for _, l := range left {
		if strings.HasPrefix(l, "connection ") {
			conns++
		} else {
			fx.t.Errorf("left over: %s", l)
		}
	}
	if conns == 0 { // a client whose connections died with a killed server may have none
		fx.t.Errorf("Leftovers lists no connection of %d open clients: %q", len(clients), left)
	}
	for _, c := range clients {
		_ = c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left, err = fx.tgt.Leftovers(context.Background()); err == nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			fx.t.Fatalf("left over after every client closed: %q, %v", left, err)
		}
	}
}

// TestKeyExpiredWhileDown: a lock whose key expires while the server is
// down is free when the server is back, and its holder's lease ended
// before the key's expiry (2/3·T after its last renewal's send); the next
// grant's token is above the holder's (the AOF kept the counter).
func TestKeyExpiredWhileDown(t *testing.T) {
	fx := newFixture(t)
	la, ca := fx.lock(0)
	lb, cb := fx.lock(1)
	a := acquire(t, la, 5*time.Second)
	T := fx.tgt.SessionTimeout()
	f := fx.inject(FaultKillServer, -1, T+500*time.Millisecond)
	if f.Err != "" {
		t.Fatal(f.Err)
	}
	if a.Context().Err() == nil {
		t.Fatal("a's lease is live after a downtime of T + 0.5 s")
	}
	b := acquire(t, lb, 5*time.Second)
	if b.Token() <= a.Token() {
		t.Errorf("b's token %d after the restart not above a's %d", b.Token(), a.Token())
	}
	if err := a.Release(context.Background()); !errors.Is(err, recipe.ErrLeaseLost) {
		t.Errorf("a's Release after its key expired: %v, want ErrLeaseLost", err)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	fx.checkClean(ca, cb)
}

// TestLaunch: Launch's target serves and stop stops its server.
func TestLaunch(t *testing.T) {
	ctx := context.Background()
	tgt, stop, err := Launch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tgt.Heal(ctx); err != nil { // answers PING
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", tgt.srv.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the server accepts connections after stop")
	}
}

// TestNeverAnExternalServer: with REDIS_TEST_ADDR naming a running server,
// Launch still starts a server of its own, whose kill-server fault takes
// effect (the run once faulted the variable's server, every kill failing
// with ErrUnsupported, and passed), and NewTarget refuses the variable's
// server with ErrExternalServer.
func TestNeverAnExternalServer(t *testing.T) {
	other, err := redistest.LaunchLocal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	t.Setenv(redistest.EnvAddr, other.Addr())

	ctx := context.Background()
	tgt, stop, err := Launch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	if tgt.Addr() == other.Addr() {
		t.Fatalf("Launch used %s=%s", redistest.EnvAddr, other.Addr())
	}
	fx := &fixture{t: t, srv: tgt.srv, tgt: tgt}
	if f := fx.inject(FaultKillServer, -1, 100*time.Millisecond); f.Err != "" {
		t.Fatalf("kill-server on Launch's server: %s", f.Err)
	}
	if err := tgt.Heal(ctx); err != nil {
		t.Fatal(err)
	}

	ext, err := redistest.Launch(ctx) // the variable's server
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Close() })
	if _, err := NewTarget(ext, 0); !errors.Is(err, ErrExternalServer) || !errors.Is(err, nemesis.ErrBadConfig) {
		t.Fatalf("NewTarget(%s's server): %v, want ErrExternalServer", redistest.EnvAddr, err)
	}
}
