// Command demo shows, against a real ZooKeeper, why a distributed lock is a
// lease and how fencing tokens make it safe.
//
// Scene 1 is Martin Kleppmann's stale-holder scenario played for real: worker
// A acquires the lock (token a), A is cut off from ZooKeeper past its session
// timeout (as if paused by a long GC), A's lease context reports the loss,
// the server expires A's session, B acquires (token b > a) and writes to a
// real database through fencesql.Do, then A resumes and the database itself
// rejects its write as stale. The database is a SQLite file in a temporary
// directory (modernc.org/sqlite), or the PostgreSQL named by
// ZKRECIPES_DEMO_DSN (or -dsn), where the demo creates the fence table and
// zkrecipes_demo_storage if missing and deletes its own rows at the end.
//
// Scene 2 runs 8 workers on separate sessions, each doing 50 fenced
// increments of a shared counter under the mutex, and checks: final value
// 400, zero overlapping holders, tokens strictly increasing.
//
// Scene 3 runs a leader election among three participants (election.Run):
// the leader is cut off, its leader function is stopped, a new leader takes
// over with a larger token, and the old leader's late write is rejected.
//
// It uses ZK_SERVERS (or -servers) if set, else starts a local ZooKeeper
// through zktest. It exits non-zero if any invariant fails.
//
// Usage:
//
//	go run ./cmd/demo [-servers host:port,...] [-dsn postgres://...] [-workers 8] [-rounds 50] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func main() {
	servers := flag.String("servers", os.Getenv("ZK_SERVERS"), "ZooKeeper connect string (default $ZK_SERVERS; empty: start a local server)")
	dsn := flag.String("dsn", os.Getenv("ZKRECIPES_DEMO_DSN"), "PostgreSQL DSN for scene 1's database (default $ZKRECIPES_DEMO_DSN; empty: a temporary SQLite file)")
	workers := flag.Int("workers", 8, "workers in scene 2, each on its own session")
	rounds := flag.Int("rounds", 50, "fenced increments per worker in scene 2")
	verbose := flag.Bool("v", false, "log session state changes")
	flag.Parse()
	if *workers < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "demo: -workers and -rounds must be at least 1")
		os.Exit(2)
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	d := &demo{start: time.Now(), logger: logger}
	list := strings.Split(*servers, ",")
	if *servers == "" {
		d.say("-", "no ZK_SERVERS given: starting a local ZooKeeper (zktest)")
		cl, err := zktest.Launch(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		defer cl.Close()
		list = cl.Servers()
	}
	d.say("-", "ZooKeeper at %s", strings.Join(list, ","))
	d.servers = list
	d.root = fmt.Sprintf("/zkrecipes-demo/%d", time.Now().UnixNano())
	st, err := openStore(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	defer st.close()
	d.store = st
	d.say("-", "scene 1's database: %s", st.what)

	ok := d.kleppmann(ctx)
	ok = d.contention(ctx, *workers, *rounds) && ok
	ok = d.leaderElection(ctx) && ok
	if !ok {
		fmt.Println("\nFAIL: an invariant was violated (see above)")
		os.Exit(1)
	}
	fmt.Println("\nPASS: every invariant held")
}

type demo struct {
	start   time.Time
	logger  *slog.Logger
	servers []string
	root    string
	store   *store // scene 1's database
}

func (d *demo) say(who, format string, args ...any) {
	fmt.Printf("[%7.3fs] %-2s %s\n", time.Since(d.start).Seconds(), who, fmt.Sprintf(format, args...))
}

func (d *demo) check(cond bool, format string, args ...any) bool {
	mark := "ok  "
	if !cond {
		mark = "FAIL"
	}
	fmt.Printf("           %s %s\n", mark, fmt.Sprintf(format, args...))
	return cond
}

func (d *demo) connect(ctx context.Context, opts ...zookeeper.Option) (*zookeeper.Session, error) {
	opts = append([]zookeeper.Option{zookeeper.WithLogger(d.logger)}, opts...)
	return zookeeper.Connect(ctx, d.servers, opts...)
}

// kleppmann plays the stale-holder scenario.
func (d *demo) kleppmann(ctx context.Context) bool {
	fmt.Println("\n== Scene 1: a paused holder, and the fencing token that stops it ==")
	lockPath := d.root + "/storage-lock"
	resource := d.root + "/storage" // the fence row's name, and the key of the protected row
	defer d.store.forget(resource)
	write := func(who string, tok fence.Token, v string) error {
		return d.store.write(ctx, resource, tok, v)
	}

	proxy := serverkit.NewFaultProxy() // A's network
	defer proxy.Close()
	sa, ma, mb, done, err := d.lockPair(ctx, lockPath, proxy)
	if err != nil {
		return d.check(false, "%v", err)
	}
	defer done()

	la, err := ma.Acquire(ctx)
	if err != nil {
		return d.check(false, "A acquire: %v", err)
	}
	a := la.Token()
	d.say("A", "acquired the lock, token a=%v (session timeout %v)", a, sa.SessionTimeout())
	if err := write("A", a, "written by A"); err != nil {
		return d.check(false, "A's first write: %v", err)
	}
	d.say("A", "writes to the database with token %v: accepted (fence row %s = %v)", a, resource, a)

	bch := acquireLater(ctx, mb)
	d.say("B", "waits for the lock")
	lostAt := d.pauseHolder(la, proxy)

	b := <-bch
	if b.err != nil {
		return d.check(false, "B acquire: %v", b.err)
	}
	d.say("B", "acquired the lock after the server expired A's session, token b=%v", b.l.Token())
	if err := write("B", b.l.Token(), "written by B"); err != nil {
		return d.check(false, "B's write: %v", err)
	}
	d.say("B", "writes to the database with token %v: accepted (fence row = %v)", b.l.Token(), b.l.Token())

	proxy.Resume()
	d.say("A", "resumes and, not checking its lease context, writes with its old token %v", a)
	staleErr := write("A", a, "stale write by A")
	if staleErr != nil {
		d.say("A", "rejected by the database: %v", staleErr)
	} else {
		d.say("A", "accepted (!)")
	}
	storage, high, readErr := d.store.read(ctx, resource)
	relErr := la.Release(ctx)
	d.say("A", "Release: %v", relErr)

	ok := d.check(b.l.Token() > a, "token b (%v) > token a (%v)", b.l.Token(), a)
	lost := time.Unix(0, lostAt.Load())
	ok = d.check(lostAt.Load() != 0 && lost.Before(b.at), "A's lease ended (%.3fs) before B acquired (%.3fs)",
		lost.Sub(d.start).Seconds(), b.at.Sub(d.start).Seconds()) && ok
	ok = d.check(errors.Is(staleErr, fence.ErrStale), "A's late write rejected as stale by the database") && ok
	ok = d.check(readErr == nil && storage == "written by B" && high == b.l.Token(), "the database holds B's value %q and B's token %v (%v)", storage, high, readErr) && ok
	ok = d.check(errors.Is(relErr, recipe.ErrLeaseLost), "A's Release reports the lost lease and deletes nothing") && ok
	if err := b.l.Release(ctx); err != nil {
		ok = d.check(false, "B release: %v", err) && ok
	}
	return ok
}

// acq is an Acquire's outcome and when it returned.
type acq struct {
	l   recipe.Lease
	err error
	at  time.Time
}

// acquireLater acquires m in the background; the channel gets the outcome.
func acquireLater(ctx context.Context, m *mutex.Mutex) <-chan acq {
	ch := make(chan acq, 1)
	go func() {
		l, err := m.Acquire(ctx)
		ch <- acq{l, err, time.Now()}
	}()
	return ch
}

// pauseHolder cuts A off through its proxy and waits until A's lease
// context ends; the returned value is when it ended (Unix ns, 0 until
// then).
func (d *demo) pauseHolder(la recipe.Lease, proxy *serverkit.FaultProxy) *atomic.Int64 {
	var lostAt atomic.Int64
	context.AfterFunc(la.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	proxy.Blackhole()
	d.say("A", "is cut off from ZooKeeper and pauses (think: a long GC pause)")
	<-la.Context().Done()
	d.say("A", "lease context done: %v", context.Cause(la.Context()))
	return &lostAt
}

// lockPair connects A (through proxy, with 2 s sessions) and B, and
// returns A's session and both mutexes on lockPath; done closes the
// sessions.
func (d *demo) lockPair(ctx context.Context, lockPath string, proxy *serverkit.FaultProxy) (sa *zookeeper.Session, ma, mb *mutex.Mutex, done func(), err error) {
	sa, err = d.connect(ctx, zookeeper.WithDialer(proxy.Dial), zookeeper.WithSessionTimeout(2*time.Second))
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("connect A: %w", err)
	}
	sb, err := d.connect(ctx)
	if err != nil {
		sa.Close()
		return nil, nil, nil, nil, fmt.Errorf("connect B: %w", err)
	}
	done = func() { sb.Close(); sa.Close() }
	ma, _ = mutex.New(sa, lockPath)
	if mb, err = mutex.New(sb, lockPath); err != nil {
		done()
		return nil, nil, nil, nil, fmt.Errorf("mutex: %w", err)
	}
	return sa, ma, mb, done, nil
}

// contention runs workers × rounds fenced increments.
func (d *demo) contention(ctx context.Context, workers, rounds int) bool {
	fmt.Printf("\n== Scene 2: %d workers on separate sessions × %d fenced increments ==\n", workers, rounds)
	lockPath := d.root + "/counter-lock"
	var (
		guard            fence.Guard
		counter          int
		holders, overlap atomic.Int32
		mu               sync.Mutex
		tokens           []fence.Token
		wg               sync.WaitGroup
		failures         atomic.Int32
	)
	sessions := make([]*zookeeper.Session, workers)
	for i := range sessions {
		s, err := d.connect(ctx)
		if err != nil {
			return d.check(false, "connect worker %d: %v", i, err)
		}
		defer s.Close()
		sessions[i] = s
	}
	start := time.Now()
	for i, s := range sessions {
		m, err := mutex.New(s, lockPath)
		if err != nil {
			return d.check(false, "mutex: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				l, err := m.Acquire(ctx)
				if err != nil {
					d.say(fmt.Sprint(i), "acquire: %v", err)
					failures.Add(1)
					return
				}
				if holders.Add(1) > 1 {
					overlap.Add(1)
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				err = guard.Do("counter", l.Token(), func() error {
					v := counter
					counter = v + 1
					return nil
				})
				if err != nil {
					d.say(fmt.Sprint(i), "write: %v", err)
					failures.Add(1)
				}
				holders.Add(-1)
				if err := l.Release(ctx); err != nil {
					d.say(fmt.Sprint(i), "release: %v", err)
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	increasing := true
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			increasing = false
		}
	}
	total := workers * rounds
	d.say("-", "%d acquisitions in %v: %.0f acquisitions/s", len(tokens), elapsed.Round(time.Millisecond), float64(len(tokens))/elapsed.Seconds())
	ok := d.check(counter == total, "final value %d (want %d)", counter, total)
	ok = d.check(overlap.Load() == 0, "%d overlapping holders", overlap.Load()) && ok
	ok = d.check(increasing && len(tokens) == total, "tokens strictly increasing across %d grants", len(tokens)) && ok
	ok = d.check(failures.Load() == 0, "%d failed operations", failures.Load()) && ok
	return ok
}
