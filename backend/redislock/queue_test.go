package redislock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/metricstest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// queueTTL is the TTL of the queue tests: long enough that no waiter's
// fallback re-check comes during a test, so every check is a wake-up's.
const queueTTL = 60 * time.Second

// sessions opens n sessions with queueTTL, reporting to rec.
func sessions(t *testing.T, srv *redistest.Server, n int, rec recipe.Metrics) []*redislock.Session {
	ss := make([]*redislock.Session, n)
	for i := range ss {
		ss[i] = connect(t, srv, nil, redislock.WithTTL(queueTTL), redislock.WithMetrics(rec))
	}
	return ss
}

// Waiters are granted in the order they queued, whichever session they
// use, a waiter that gives up is skipped, and nobody barges in: a
// TryAcquire during the hand-offs finds the lock taken until the last
// waiter has released it.
func TestWaitersServedInArrivalOrder(t *testing.T) {
	srv := redistest.Start(t)
	const name, n, quitter = "fifo", 10, 4
	rec := &metricstest.Events{}
	ss := sessions(t, srv, 3, rec)
	holder := acquire(t, mustNew(t, ss[0], name))

	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	quit, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), queueTTL)
		if i == quitter {
			ctx = quit
		}
		wg.Go(func() {
			defer cancel()
			l, err := mustNew(t, ss[i%len(ss)], name).Acquire(ctx)
			if i == quitter {
				if err == nil {
					t.Errorf("waiter %d, which gave up, was granted", i)
					release(t, l)
				}
				return
			}
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release(t, l)
		})
		serverkit.Eventually(t, 10*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool {
			return rec.Count("waiting lock "+name+" +1") == i+1
		})
	}
	giveUp()
	serverkit.Eventually(t, 10*time.Second, "the quitter gone", func() bool { return rec.Count("waiting lock "+name+" -1") == 1 })

	barged := make(chan recipe.Lease, 1)
	stop := make(chan struct{})
	go func() { // a newcomer that keeps trying
		defer close(barged)
		m := mustNew(t, ss[1], name)
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := m.TryAcquire(context.Background())
			if err == nil {
				mu.Lock()
				early := len(order) < n-1
				mu.Unlock()
				if early {
					barged <- l
					return
				}
				release(t, l)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	release(t, holder)
	wg.Wait()
	close(stop)
	if l := <-barged; l != nil {
		t.Errorf("a TryAcquire was granted before the queue had been served (order so far %v)", order)
		release(t, l)
	}
	want := []int{0, 1, 2, 3, 5, 6, 7, 8, 9}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("grant order %v, want the arrival order %v", order, want)
	}
}

// A release wakes the next waiter only: the commands the server runs per
// hand-off (scripts, the commands they call, subscriptions; INFO
// commandstats) are as many with 200 waiters as with 50, and the waiters
// of a session share one pub/sub connection. (Before, every release woke
// every waiter: with 300 waiters 45,594 script calls, each waiter on a
// pub/sub connection of its own.)
func TestHandOffWorkDoesNotGrowWithWaiters(t *testing.T) {
	srv := redistest.Start(t)
	per := make(map[int]float64)
	for _, n := range []int{50, 200} {
		per[n] = handOffWork(t, srv, n)
	}
	t.Logf("commands per hand-off: %.1f with 50 waiters, %.1f with 200", per[50], per[200])
	if per[200] > per[50]*1.1+1 {
		t.Errorf("commands per hand-off grow with the waiters: %.1f with 50, %.1f with 200", per[50], per[200])
	}
}

// handOffWork queues n waiters (on 4 sessions) behind a holder, releases,
// waits until each was granted and released in turn, and returns the
// commands the server ran meanwhile per hand-off.
func handOffWork(t *testing.T, srv *redistest.Server, n int) float64 {
	const nsessions = 4
	name := "work-" + strconv.Itoa(n)
	rec := &metricstest.Events{}
	ss := sessions(t, srv, nsessions, rec)
	holder := acquire(t, mustNew(t, ss[0], name))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), queueTTL)
			defer cancel()
			l, err := mustNew(t, ss[i%nsessions], name).Acquire(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			release(t, l)
		})
	}
	serverkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d waiters queued", n), func() bool {
		return rec.Count("waiting lock "+name+" +1") == n
	})
	ctx := context.Background()
	rdb := srv.Client(t)
	if pubsub := clients(t, rdb, "pubsub"); pubsub > nsessions {
		t.Errorf("%d waiters on %d sessions hold %d pub/sub connections, want at most one per session", n, nsessions, pubsub)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	release(t, holder)
	wg.Wait()
	calls := commandCalls(t, rdb)
	t.Logf("%d waiters: %d commands for %d hand-offs", n, calls, n)
	return float64(calls) / float64(n)
}

// commandCalls returns the calls of every command since the last CONFIG
// RESETSTAT (those a script calls counted too), but INFO's and CONFIG's.
func commandCalls(t *testing.T, rdb *redis.Client) int {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for line := range strings.Lines(info) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || strings.HasPrefix(name, "cmdstat_info") || strings.HasPrefix(name, "cmdstat_config") {
			continue
		}
		calls, _, _ := strings.Cut(stats, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// clients returns the number of the server's client connections of a type
// (normal, pubsub).
func clients(t *testing.T, rdb *redis.Client, typ string) int {
	list, err := rdb.Do(context.Background(), "CLIENT", "LIST", "TYPE", typ).Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n")
}

// A waiter that dies does not stall the queue: one whose process crashed
// (its connections closed: the hand-off finds no subscriber) is skipped at
// once; one cut off (the server still counts its subscription) is handed
// the lock, and the next waiter is granted when that hand-off expires,
// within the bound of a crashed holder's lock (T plus T/10 of re-check
// jitter, with slack for a loaded machine).
func TestDeadWaiterDoesNotStallQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, crash := range []bool{true, false} {
		name := "dead-waiter-cut"
		if crash {
			name = "dead-waiter-crash"
		}
		rec := &metricstest.Events{}
		p := serverkit.NewFaultProxy()
		t.Cleanup(p.Close)
		holder := acquire(t, mustNew(t, connect(t, srv, nil), name))
		dead := mustNew(t, connect(t, srv, p, redislock.WithMetrics(rec)), name)
		next := mustNew(t, connect(t, srv, nil, redislock.WithMetrics(rec)), name)
		deadCtx, cancelDead := context.WithCancel(context.Background())
		deadDone := make(chan struct{})
		go func() {
			defer close(deadDone)
			if l, err := dead.Acquire(deadCtx); err == nil {
				t.Errorf("%s: the dead waiter was granted", name)
				_ = l.Release(context.Background())
			}
		}()
		rec.WaitFor(t, 10*time.Second, "waiting lock "+name+" +1")
		got := make(chan recipe.Lease, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := next.Acquire(ctx)
			if err != nil {
				t.Errorf("%s: the next waiter: %v", name, err)
			}
			got <- l
		}()
		serverkit.Eventually(t, 10*time.Second, "both queued", func() bool { return rec.Count("waiting lock "+name+" +1") == 2 })
		if crash {
			p.Close()
			rdb := srv.Client(t)
			serverkit.Eventually(t, 10*time.Second, "the server saw the crash", func() bool { return clients(t, rdb, "pubsub") == 1 })
		} else {
			p.Blackhole()
		}
		released := time.Now()
		release(t, holder)
		l := <-got
		took := time.Since(released)
		t.Logf("%s: the next waiter was granted %v after the release (T = %v)", name, took.Round(time.Millisecond), confTTL)
		bound := time.Second // skipped at once
		if !crash {
			bound = confTTL + confTTL/10 + 2*time.Second
		}
		if took > bound {
			t.Errorf("%s: the next waiter was granted %v after the release, want within %v", name, took, bound)
		}
		if l != nil {
			release(t, l)
		}
		cancelDead()
		p.Close()
		<-deadDone
	}
}

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
