package redistest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestPauseResume: a paused server answers nothing and keeps what clients
// send; Resume answers it. A paused server can be killed and restarted.
func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- c.Incr(ctx, "n").Err() }() // queued in the kernel while paused
	select {
	case err := <-got:
		t.Fatalf("a paused server answered INCR: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("INCR sent while paused: %v after Resume, want it done", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil { // SIGKILL of a stopped process, then start
		t.Fatalf("Restart of a paused server: %v", err)
	}
	if v, err := c.Get(ctx, "n").Result(); err != nil || v != "1" {
		t.Errorf("n after the restart = %q, %v; want 1", v, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err == nil {
		t.Error("Pause of a killed server succeeded")
	}
}

// TestKillClients: every connection of the named client is closed by the
// server, its pub/sub connection included, and no other client's; the
// named client dials again (through its proxy) and works.
func TestKillClients(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	p := serverkit.NewFaultProxy()
	t.Cleanup(p.Close)
	named := func(name string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ClientName: name, Dialer: p.DialContext, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := named("a"), named("b")
	ps := a.Subscribe(ctx, "wake")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	before, err := s.Clients(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || !slices.ContainsFunc(before, func(c ClientConn) bool { return c.Sub }) {
		t.Fatalf("client a's connections: %+v; want 2, one of them pub/sub", before)
	}
	bBefore, _ := s.Clients(ctx, "b")
	n, err := s.KillClients(ctx, "a")
	if err != nil || n != 2 {
		t.Fatalf("KillClients(a) = %d, %v; want 2", n, err)
	}
	after, _ := s.Clients(ctx, "")
	for _, c := range after {
		if slices.ContainsFunc(before, func(o ClientConn) bool { return o.ID == c.ID }) {
			t.Errorf("connection %+v of a still open", c)
		}
	}
	if !slices.ContainsFunc(after, func(c ClientConn) bool { return c.ID == bBefore[0].ID }) {
		t.Errorf("b's connection %+v closed too", bBefore[0])
	}
	if err := a.Ping(ctx).Err(); err == nil {
		t.Log("a's first PING after the kill was answered (go-redis noticed the close before sending)")
	}
	if err := a.Ping(ctx).Err(); err != nil {
		t.Errorf("a's PING after the kill, on a new connection: %v", err)
	}
	if err := b.Ping(ctx).Err(); err != nil {
		t.Errorf("b's PING: %v", err)
	}
	if _, err := s.KillClients(ctx, ""); err == nil {
		t.Error("KillClients with no name succeeded")
	}
}

// TestSleep: DEBUG SLEEP keeps the server from answering anyone for its
// duration; Redis 7 refuses DEBUG without WithDebugCommand.
func TestSleep(t *testing.T) {
	ctx := context.Background()
	s := Start(t, WithDebugCommand())
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() { slept <- s.Sleep(ctx, 600*time.Millisecond) }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("PING during DEBUG SLEEP answered in %v, want after the sleep", took)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	plain := Start(t)
	if err := plain.Sleep(ctx, time.Millisecond); err == nil {
		t.Log("this server allows DEBUG without enable-debug-command (Redis before 7)")
	}
}

// TestCrashKeepsAnsweredWrites: with appendfsync always, kill -9 keeps
// every answered write: a counter, a key with a long expiry (with its
// absolute expiry: the downtime counts against it). A key whose expiry
// passed while the server was down is gone when it is back.
func TestCrashKeepsAnsweredWrites(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := s.Client(t)
	for range 3 {
		if err := c.Incr(ctx, "token").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, "long", "a", 60*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "short", "b", 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "token").Result(); err != nil || v != "3" {
		t.Errorf("token after kill -9 = %q, %v; want 3", v, err)
	}
	if left, err := c.PTTL(ctx, "long").Result(); err != nil || left <= 0 || left > 59*time.Second {
		t.Errorf("long's PTTL after a 1 s downtime = %v, %v; want under 59 s", left, err)
	}
	if _, err := c.Get(ctx, "short").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("short, expired during the downtime: GET = %v, want nil", err)
	}
}
