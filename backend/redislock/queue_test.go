package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
)

// waitQueued waits until m's queue holds n waiters (each subscribed before
// it joined).
func waitQueued(t *testing.T, rdb *redis.Client, m *redislock.Mutex, n int64) {
	t.Helper()
	for i := 0; ; i++ {
		got, err := rdb.ZCard(context.Background(), m.QueueKey()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if i > 1000 {
			t.Fatalf("%s holds %d waiters, want %d", m.QueueKey(), got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noWaiters checks that m has no queued waiter and no waiter's channel
// left subscribed.
func noWaiters(t *testing.T, rdb *redis.Client, m *redislock.Mutex) {
	t.Helper()
	ctx := context.Background()
	pattern := m.QueueKey()[:len(m.QueueKey())-len("queue")] + "wake:*"
	if chs, err := rdb.PubSubChannels(ctx, pattern).Result(); err != nil || len(chs) != 0 {
		t.Errorf("waiters' channels subscribed: %q, %v; want none", chs, err)
	}
	if n, err := rdb.ZCard(ctx, m.QueueKey()).Result(); err != nil || n != 0 {
		t.Errorf("waiters queued: %d, %v; want none", n, err)
	}
}
