package redislock_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestRenewalSurvivesKilledConnection: the server closes the holder's
// connection (CLIENT KILL, as an operator or a proxy's idle timeout
// would) just before its first renewal; the renewal fails on the dead
// connection and its retry, on a new one, must come well before the
// lease's deadline, T/3 later. With T = 1 s that leaves 333 ms; the first
// retry used to wait 250-750 ms (the backoff started from its package's
// default 500 ms, not from T/30: internal/loop), and the lease was lost in
// most rounds (found by the nemesis's client-kill fault).
func TestRenewalSurvivesKilledConnection(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const ttl = time.Second
	for round := range 3 {
		p := serverkit.NewFaultProxy()
		t.Cleanup(p.Close)
		s, err := redislock.Connect(ctx, srv.URL()+"?client_name=holder", redislock.WithTTL(ttl),
			redislock.WithKeyPrefix(srv.KeyPrefix()), redislock.WithDialer(p.DialContext),
			redislock.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		l := acquire(t, mustNew(t, s, "killed"))
		if n, err := srv.KillClients(ctx, "holder"); err != nil || n == 0 {
			t.Fatalf("KillClients = %d, %v", n, err)
		}
		time.Sleep(ttl) // the first renewal, its retry, and past the deadline it had
		if err := l.Context().Err(); err != nil {
			t.Errorf("round %d: the lease ended after one killed connection: %v", round, context.Cause(l.Context()))
		}
		_ = l.Release(ctx)
		_ = s.Close()
	}
}
