package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// grantAndRelease takes and releases m n times and returns the last token.
func grantAndRelease(t *testing.T, m *redislock.Mutex, n int) fence.Token {
	t.Helper()
	var last fence.Token
	for i := 0; i < n; i++ {
		l := acquire(t, m)
		if l.Token() <= last {
			t.Fatalf("token %v after %v", l.Token(), last)
		}
		last = l.Token()
		release(t, l)
	}
	return last
}

func acquire(t *testing.T, m *redislock.Mutex) recipe.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire %s: %v", m.Name(), err)
	}
	return l
}

func release(t *testing.T, l recipe.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// acquireAfterRestart retries Acquire while the restarted server's first
// answers on the pooled (dead) connections fail.
func acquireAfterRestart(t *testing.T, m *redislock.Mutex) recipe.Lease {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := m.Acquire(ctx)
		cancel()
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire after the restart: %v", err)
		}
	}
}

// Tokens survive a crash of the server: with the append-only file fsynced
// before every reply, every INCR that answered is on disk, so a SIGKILL and
// a restart do not make the counter go back.
func TestTokensSurviveServerCrash(t *testing.T) {
	srv := redistest.Start(t)
	m := mustNew(t, connect(t, srv, nil), "restart")
	before := grantAndRelease(t, m, 3)

	if err := srv.Restart(context.Background()); err != nil { // SIGKILL, then start on the same port and directory
		t.Fatal(err)
	}
	l := acquireAfterRestart(t, m)
	t.Logf("token %v before the crash, %v after", before, l.Token())
	if l.Token() <= before {
		t.Errorf("token %v after the server's crash and restart is not larger than %v before it", l.Token(), before)
	}
	release(t, l)
	ctx := context.Background()
	rdb := srv.Client(t)
	if ttl, err := rdb.PTTL(ctx, m.TokenKey()).Result(); err != nil || ttl != -time.Nanosecond {
		// go-redis reports PTTL -1 (no expiry) as -1 ns
		t.Errorf("token counter PTTL = %v, %v; want no expiry", ttl, err)
	}
}

// A lock held across a crash of the server stays held: the key comes back
// from the append-only file with its absolute expiry, so nobody else is let
// in while the holder's lease context is live, and the holder's renewals
// find it theirs again.
func TestHeldLockSurvivesServerCrash(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const ttl = 6 * time.Second // the lease (4 s) lasts far longer than a restart
	a := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "held-restart")
	b := mustNew(t, connect(t, srv, nil, redislock.WithTTL(ttl)), "held-restart")
	la := acquire(t, a)

	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	ctx := context.Background()
	rdb := srv.Client(t)
	if owner, err := rdb.Get(ctx, a.Key()).Result(); err != nil || owner != redislock.Owner(la) {
		t.Errorf("lock key after the restart = %q, %v; want A's owner id", owner, err)
	}
	if left, err := rdb.PTTL(ctx, a.Key()).Result(); err != nil || left <= 0 || left > ttl {
		t.Errorf("lock key PTTL after the restart = %v, %v; want its remaining time", left, err)
	}
	var lb recipe.Lease
	for i := 0; ; i++ {
		var err error
		lb, err = b.TryAcquire(ctx)
		if errors.Is(err, recipe.ErrLocked) {
			break
		}
		if err == nil {
			if la.Context().Err() == nil {
				t.Fatalf("B was granted after the restart while A's lease is live: two holders")
			}
			break // the restart took longer than A's lease: B's grant is legitimate
		}
		if i > 100 {
			t.Fatalf("B: TryAcquire after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // B's pooled connection died with the server
	}
	if lb == nil {
		// A's renewals reach the restarted server and find the key A's:
		// its deadline moves past what a renewal sent before the restart
		// could give.
		for la.Context().Err() == nil && !redislock.Deadline(la).After(restarted.Add(redislock.LossAfter(ttl))) {
			time.Sleep(50 * time.Millisecond)
		}
		if err := la.Context().Err(); err != nil {
			t.Errorf("A's lease ended after the restart: %v", context.Cause(la.Context()))
		}
		release(t, la)
		lb = acquire(t, b)
	}
	if lb.Token() <= la.Token() {
		t.Errorf("B's token %v after the restart is not larger than A's %v", lb.Token(), la.Token())
	}
	release(t, lb)
}

// The hazard the durable settings prevent: a server without an fsynced
// append-only file forgets on a crash what it granted, and the token
// counter starts again, so a new holder can get a token an earlier holder
// already used and the resource can't tell them apart. Connect warns.
func TestWithoutPersistenceTokensRepeat(t *testing.T) {
	srv := redistest.Start(t, redistest.WithoutPersistence())
	var logs syncBuffer
	s := connect(t, srv, nil, redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !strings.Contains(logs.String(), "does not fsync every write") {
		t.Errorf("Connect to a server without appendfsync always logged no warning; logs:\n%s", logs.String())
	}
	m := mustNew(t, s, "no-fsync")
	before := grantAndRelease(t, m, 3)

	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := acquireAfterRestart(t, m)
	t.Logf("without persistence: token %v before the crash, %v after", before, l.Token())
	if l.Token() > before {
		t.Errorf("token %v after a crash without persistence is larger than %v: the hazard this test documents is gone?", l.Token(), before)
	}
	release(t, l)
}

// A server that evicts keys when full could evict the token counter (tokens
// start again from 1) or a held lock's key: Connect warns.
func TestEvictionWarning(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"))
	var logs syncBuffer
	connect(t, srv, nil, redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !strings.Contains(logs.String(), "evicts keys") {
		t.Errorf("Connect to a server with allkeys-lru logged no warning; logs:\n%s", logs.String())
	}
	var clean syncBuffer
	connect(t, redistest.Start(t), nil, redislock.WithLogger(slog.New(slog.NewTextHandler(&clean, nil))))
	if s := clean.String(); s != "" {
		t.Errorf("Connect to a durable server without replicas or eviction logged:\n%s", s)
	}
}

// syncBuffer is a bytes.Buffer for a logger used from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
