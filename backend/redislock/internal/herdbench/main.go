// Command herdbench measures one Redis lock with many waiters: a holder,
// N waiters queued behind it (on one Session, or -sessions of them), then
// the release, after which every waiter in turn is granted and releases.
// It prints the time from the release until the last waiter had released,
// the server's command count for it (INFO commandstats, commands scripts
// call included), the server's client connections and the client's heap
// (after a GC) while the waiters wait. The server is started by
// redistest (appendonly yes, appendfsync always), or named by
// REDIS_TEST_ADDR.
//
//	go run ./internal/herdbench -waiters 1000 [-sessions 1] [-ttl 10s]
//
// (run in backend/redislock). The figures are in docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func main() {
	waiters := flag.Int("waiters", 1000, "waiters queued behind the holder")
	sessions := flag.Int("sessions", 1, "sessions the waiters are spread over")
	ttl := flag.Duration("ttl", redislock.DefaultTTL, "the sessions' TTL")
	flag.Parse()
	if err := run(*waiters, *sessions, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "herdbench:", err)
		os.Exit(1)
	}
}

// waiting counts the waiters (recipe.Metrics.Waiting); the rest is ignored.
type waiting struct{ n atomic.Int64 }

func (w *waiting) AcquireStarted(string, string)                          {}
func (w *waiting) AcquireDone(string, string, time.Duration, error)       {}
func (w *waiting) Waiting(_, _ string, delta int)                         { w.n.Add(int64(delta)) }
func (w *waiting) LeaseLost(string, string, error)                        {}
func (w *waiting) SessionState(recipe.ConnState, recipe.ConnState, error) {}
func (w *waiting) StaleRejected(*fence.StaleError)                        {}

func run(n, nsessions int, ttl time.Duration) error {
	ctx := context.Background()
	srv, err := redistest.Launch(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	w := &waiting{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ss := make([]*redislock.Session, nsessions)
	for i := range ss {
		ss[i], err = redislock.Connect(ctx, srv.URL(), redislock.WithTTL(ttl), redislock.WithKeyPrefix(srv.KeyPrefix()),
			redislock.WithLogger(quiet), redislock.WithMetrics(w))
		if err != nil {
			return err
		}
		defer ss[i].Close()
	}
	m, err := redislock.New(ss[0], "herd")
	if err != nil {
		return err
	}
	holder, err := m.Acquire(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Go(func() {
			m, _ := redislock.New(ss[i%nsessions], "herd")
			l, err := m.Acquire(ctx)
			if err != nil {
				failed.Add(1)
				return
			}
			_ = l.Release(ctx)
		})
	}
	for start := time.Now(); w.n.Load() < int64(n); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 2*time.Minute {
			return fmt.Errorf("only %d of %d waiters queued after 2 min", w.n.Load(), n)
		}
	}
	time.Sleep(time.Second)                                       // settle: the last subscriptions' tries
	clients := info(ctx, rdb, "clients", "connected_clients") - 1 // without ours
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		return err
	}
	wg.Wait()
	took := time.Since(start)
	cmds := commands(ctx, rdb)
	fmt.Printf("waiters=%d sessions=%d ttl=%v: %v from the release to the last hand-off (%d failed); %d commands (%.1f per hand-off); %d server connections while waiting; client heap %.1f MiB\n",
		n, nsessions, ttl, took.Round(10*time.Millisecond), failed.Load(), cmds, float64(cmds)/float64(n), clients,
		float64(ms.HeapAlloc)/(1<<20))
	return nil
}

// info returns an integer field of an INFO section (-1 if missing).
func info(ctx context.Context, rdb *redis.Client, section, field string) int {
	s, _ := rdb.Info(ctx, section).Result()
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// commands sums the calls of INFO commandstats, but INFO's and CONFIG's.
func commands(ctx context.Context, rdb *redis.Client) int {
	s, _ := rdb.Info(ctx, "commandstats").Result()
	total := 0
	for line := range strings.Lines(s) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || strings.HasPrefix(name, "cmdstat_info") || strings.HasPrefix(name, "cmdstat_config") {
			continue
		}
		calls, _, _ := strings.Cut(stats, ",")
		n, _ := strconv.Atoi(calls)
		total += n
	}
	return total
}
