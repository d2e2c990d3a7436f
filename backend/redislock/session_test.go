package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestConnectBadURL(t *testing.T) {
	for _, u := range []string{
		"", "localhost:6379", "http://localhost:6379", "redis://", "redis://:6379",
		"redis://h1:6379,h2:6379", "redis://localhost:6379/notadb", "redis://localhost:6379/0?dial_timeout=soon",
		"redis://[::1", "unix:///run/redis.sock",
	} {
		s, err := redislock.Connect(context.Background(), u)
		if !errors.Is(err, redislock.ErrBadURL) {
			t.Errorf("Connect(%q) = %v, want an error matching ErrBadURL", u, err)
		}
		if s != nil {
			s.Close()
		}
	}
}

func TestConnectBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]redislock.Option{
		"short TTL":  redislock.WithTTL(redislock.MinTTL - time.Millisecond),
		"100 ms TTL": redislock.WithTTL(100 * time.Millisecond), // a 33 ms margin: two holders overlapped under load
		"zero TTL":   redislock.WithTTL(0),
		"nil dialer": redislock.WithDialer(nil),
	} {
		if _, err := redislock.Connect(ctx, "redis://127.0.0.1:1", opt); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: Connect = %v, want an error matching recipe.ErrBadOption", name, err)
		}
	}
}

// A server that does not answer makes Connect fail early with the dial
// error, not hang.
func TestConnectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = redislock.Connect(ctx, "redis://"+addr)
	var op *recipe.OpError
	var ne *net.OpError
	if !errors.As(err, &op) || !errors.As(err, &ne) || !errors.Is(err, recipe.ErrUnreachable) {
		t.Errorf("Connect to a closed port = %v, want a *recipe.OpError wrapping the *net.OpError, matching recipe.ErrUnreachable", err)
	}
	t.Logf("Connect to a closed port failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestNewBadName(t *testing.T) {
	srv := redistest.Start(t)
	s := connect(t, srv, nil)
	for _, n := range []string{"", "a\x00b", "a\xffb", strings.Repeat("x", redislock.MaxNameLen+1)} {
		if _, err := redislock.New(s, n); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%.40q, %d bytes) = %v, want an error matching recipe.ErrInvalidPath", n, len(n), err)
		}
		if err := redislock.CheckName(n); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("CheckName(%.40q, %d bytes) = %v, want an error matching recipe.ErrInvalidPath (no session needed)", n, len(n), err)
		}
	}
	for _, n := range []string{"a\nb", "/", "a//b", "a/"} { // names other backends once refused
		release(t, acquire(t, mustNew(t, s, n)))
	}
	if err := redislock.CheckName(strings.Repeat("x", redislock.MaxNameLen)); err != nil {
		t.Errorf("CheckName(MaxNameLen bytes) = %v", err)
	}
	if _, err := redislock.New(s, strings.Repeat("x", redislock.MaxNameLen)); err != nil {
		t.Errorf("New(MaxNameLen bytes) = %v", err)
	}
	if _, err := redislock.New(nil, "x"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil session) = %v, want ErrBadOption", err)
	}
}

// Close ends live leases (ErrSessionClosed) and deletes their keys, ends
// waiting Acquire calls, and makes later calls fail with ErrSessionClosed.
func TestCloseReleasesAndStopsWaiters(t *testing.T) {
	srv := redistest.Start(t)
	s := connect(t, srv, nil)
	held := mustNew(t, s, "close-held")
	other := mustNew(t, connect(t, srv, nil), "close-other")
	waiting := mustNew(t, s, "close-other")
	lh := acquire(t, held)
	lo := acquire(t, other)
	defer release(t, lo)
	waitErr := make(chan error, 1)
	go func() {
		_, err := waiting.Acquire(context.Background())
		waitErr <- err
	}()
	time.Sleep(100 * time.Millisecond)

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if cause := context.Cause(lh.Context()); !errors.Is(cause, recipe.ErrSessionClosed) {
		t.Errorf("held lease cause after Close = %v, want ErrSessionClosed", cause)
	}
	select {
	case err := <-waitErr:
		if !errors.Is(err, recipe.ErrSessionClosed) {
			t.Errorf("waiting Acquire after Close = %v, want ErrSessionClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Acquire did not return after Close")
	}
	ctx := context.Background()
	if n, err := srv.Client(t).Exists(ctx, held.Key()).Result(); err != nil || n != 0 {
		t.Errorf("the held lock's key after Close: exists=%d, %v", n, err)
	}
	if err := lh.Release(ctx); !errors.Is(err, recipe.ErrLeaseLost) || !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("Release after Close = %v, want ErrLeaseLost wrapping ErrSessionClosed", err)
	}
	if _, err := held.TryAcquire(ctx); !errors.Is(err, recipe.ErrSessionClosed) {
		t.Errorf("TryAcquire after Close = %v, want ErrSessionClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// NewSession uses a caller's client, refuses one without context
// deadlines, and leaves the client open at Close.
func TestNewSession(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer plain.Close()
	if _, err := redislock.NewSession(ctx, plain); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewSession(client without ContextTimeoutEnabled) = %v, want ErrBadOption", err)
	}
	if _, err := redislock.NewSession(ctx, nil); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("NewSession(nil) = %v, want ErrBadOption", err)
	}
	cli := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()
	s, err := redislock.NewSession(ctx, cli, redislock.WithTTL(confTTL), redislock.WithKeyPrefix(srv.KeyPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	grantAndRelease(t, mustNew(t, s, "new-session"), 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cli.Ping(ctx).Err(); err != nil {
		t.Errorf("the caller's client after Close: %v", err)
	}
}

// Locks live on one primary: a replica is refused, and a primary with
// replicas gets a warning (replication is asynchronous: a failover can lose
// grants and tokens).
func TestReplicas(t *testing.T) {
	primary := redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	host, port, _ := net.SplitHostPort(primary.Addr())
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", host, port))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := redislock.Connect(ctx, replica.URL()); !errors.Is(err, redislock.ErrNotPrimary) {
		t.Errorf("Connect to a replica = %v, want ErrNotPrimary", err)
	}
	rdb := primary.Client(t)
	for {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "state=online") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the replica never connected:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var logs syncBuffer
	s, err := redislock.Connect(ctx, primary.URL(), redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(logs.String(), "the server has replicas") {
		t.Errorf("Connect to a primary with a replica logged no warning; logs:\n%s", logs.String())
	}
}

// A Release racing Close returns nil or an error matching
// recipe.ErrSessionClosed, and either way the key is gone when Close
// returns: Close deletes it, or waits for the Release that does.
func TestReleaseDuringClose(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	for i := range 20 {
		s := connect(t, srv, nil)
		m := mustNew(t, s, "release-close")
		l := acquire(t, m)
		done := make(chan error, 1)
		go func() { done <- l.Release(ctx) }()
		if i%2 == 0 {
			time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.Exists(ctx, m.Key()).Result(); err != nil || n != 0 {
			t.Fatalf("round %d: the key after Close: exists=%d, %v", i, n, err)
		}
		if err := <-done; err != nil && !errors.Is(err, recipe.ErrSessionClosed) {
			t.Fatalf("round %d: Release during Close = %v", i, err)
		}
	}
}
