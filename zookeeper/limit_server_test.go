package zookeeper_test

// Every recipe on a real ZooKeeper whose directories' sequence counters were
// written just below their limit (zktest.WithSeqCounters: a snapshot made
// with the server's own classes), so that the contenders straddle 2147483647
// and, on 3.5+, get it again and again (docs/design.md#the-sequence-limit).
// Run against Debian 12's 3.8.0 by default and against 3.9.3 with
// ZOOKEEPER_HOME="$(scripts/zk-debian.sh)" (make test runs both).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// limitDirs is every directory the sequence-limit tests use, with how far
// below the limit its counter starts: one seeded server holds them all (a
// server of its own per test cost a seeding and a JVM start each), and
// each test works in its own directories, so they run in parallel.
var limitDirs = map[string]int32{
	"/limit/mutex":    3,
	"/limit/c/mutex":  20,
	"/limit/c/sem":    20,
	"/limit/c/rw":     20,
	"/limit/rw":       2,
	"/limit/latch":    1,
	"/limit/election": 1,
	"/limit/warn":     2,
	"/limit/sem":      2,
}

// limitServer is one seeded server and the directories that tests have
// already used on it: its counters only move up, so a directory serves
// one test run (a second, under -count or -cpu, gets a fresh server).
type limitServer struct {
	cl   zookeeper.OnceCluster
	used map[string]bool
}

var (
	limitMu      sync.Mutex
	limitServers []*limitServer
)

// limitCluster returns a seeded server on which each of dirs has its
// counter at the given distance below the limit (as limitDirs says): the
// next create there gets 2147483647 - below. The test must be the only
// one to use dirs there.
func limitCluster(t *testing.T, below int32, dirs ...string) *zktest.Cluster {
	t.Helper()
	for _, d := range dirs {
		if b, ok := limitDirs[d]; !ok || b != below {
			t.Fatalf("limitCluster: %s is not in limitDirs at %d below the limit", d, below)
		}
	}
	limitMu.Lock()
	var srv *limitServer
	for _, s := range limitServers {
		if !slices.ContainsFunc(dirs, func(d string) bool { return s.used[d] }) {
			srv = s
			break
		}
	}
	if srv == nil {
		srv = &limitServer{used: map[string]bool{}}
		limitServers = append(limitServers, srv)
	}
	for _, d := range dirs {
		srv.used[d] = true
	}
	limitMu.Unlock()
	counters := map[string]int32{}
	for d, b := range limitDirs {
		counters[d] = math.MaxInt32 - b
	}
	return srv.cl.Get(t, zktest.WithSeqCounters(counters))
}

// suffix is the sequence a queue znode's name ends with
// (_c_<guid>-<kind><seq>, every kind here ending in its only dash; an
// anchored node's after its last '@').
func suffix(t *testing.T, name string) int32 {
	t.Helper()
	rest := name[len("_c_")+32+1:]
	s := rest[strings.IndexByte(rest, '-')+1:]
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		t.Fatalf("suffix of %s: %v", name, err)
	}
	return int32(v)
}

// stuckCount counts the names in dir whose sequence is 2147483647: the
// state under test (more than one means the server gave it again).
func stuckCount(t *testing.T, in *zktest.Inspector, dir string) int {
	n := 0
	for _, c := range in.Children(dir) {
		if suffix(t, c) == math.MaxInt32 {
			n++
		}
	}
	return n
}

// queueUp starts acquire on each of the n contenders one after another,
// each only once the previous one's node is in dir (so that the creation
// order is the index order), and returns their results.
func queueUp(t *testing.T, in *zktest.Inspector, dir string, base int, acquire []func(context.Context) (recipe.Lease, error)) []<-chan rtest.Result {
	t.Helper()
	chs := make([]<-chan rtest.Result, len(acquire))
	for i, a := range acquire {
		chs[i] = rtest.Async(t.Context(), a)
		serverkit.Eventually(t, 10*time.Second, fmt.Sprintf("contender %d's node", i), func() bool {
			return len(in.Children(dir)) == base+i+1
		})
	}
	return chs
}

// noneGranted fails the test if any of chs delivers a result within d.
func noneGranted(t *testing.T, d time.Duration, what string, chs ...<-chan rtest.Result) {
	t.Helper()
	deadline := time.After(d)
	for {
		for i, ch := range chs {
			select {
			case r := <-ch:
				t.Fatalf("%s: contender %d answered early (err %v): granted out of creation order", what, i, r.Err)
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkCreationOrder checks that ps (a Participants listing) is in
// creation order: tokens (czxids) strictly increasing.
func checkCreationOrder(t *testing.T, ps []zookeeper.Participant) {
	t.Helper()
	for i := 1; i < len(ps); i++ {
		if ps[i].Token <= ps[i-1].Token {
			t.Fatalf("Participants not in creation order: %s (token %d) listed after %s (token %d)", ps[i].Name, ps[i].Token, ps[i-1].Name, ps[i-1].Token)
		}
	}
}

// TestSequenceLimitMutexHandOff: a holder below the limit and contenders
// queued across it (2147483645, 2147483646, 2147483647 and then
// 2147483647 again on 3.5+) are granted in creation order, one at a time;
// a newcomer that arrives while a holder with the stuck sequence holds is
// not granted beside it; Participants lists them in creation order.
func TestSequenceLimitMutexHandOff(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	const dir = "/limit/mutex"
	cl := limitCluster(t, 3, dir)
	in := zktest.Inspect(t, cl)
	const n = 7
	ms := make([]*mutex.Mutex, n+2)
	for i := range ms {
		m, err := mutex.New(rtest.Connect(t, cl), dir)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	first, err := ms[0].Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	acq := make([]func(context.Context) (recipe.Lease, error), n-1)
	for i := range acq {
		acq[i] = ms[i+1].Acquire
	}
	chs := queueUp(t, in, dir, 1, acq)
	if got := stuckCount(t, in, dir); got < 2 {
		t.Fatalf("%d nodes with sequence 2147483647, want several: the server is not at the limit (children %v)", got, in.Children(dir))
	}
	ps, err := ms[0].Participants(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != n {
		t.Fatalf("Participants lists %d nodes, want %d", len(ps), n)
	}
	checkCreationOrder(t, ps)

	held := first
	tokens := []fence.Token{first.Token()}
	for i, ch := range chs {
		noneGranted(t, 100*time.Millisecond, fmt.Sprintf("while contender %d holds", i), chs[i:]...)
		if i == 3 {
			// The holder is the first node with the stuck sequence: a
			// newcomer gets the same sequence and must queue behind it
			// (and behind every earlier waiter).
			late := queueUp(t, in, dir, len(in.Children(dir)), []func(context.Context) (recipe.Lease, error){ms[n].Acquire, ms[n+1].Acquire})
			noneGranted(t, 300*time.Millisecond, "newcomers beside a stuck holder", late...)
			chs = append(chs, late...)
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := rtest.Await(t, ch, 10*time.Second)
		if r.Err != nil {
			t.Fatalf("contender %d: %v", i+1, r.Err)
		}
		held = r.Lease
		tokens = append(tokens, held.Token())
	}
	for i := n - 1; i < len(chs); i++ { // the newcomers, in their order
		if err := held.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := rtest.Await(t, chs[i], 10*time.Second)
		if r.Err != nil {
			t.Fatalf("newcomer: %v", r.Err)
		}
		held = r.Lease
		tokens = append(tokens, held.Token())
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(tokens) {
		t.Fatalf("grant tokens %v: not in creation order", tokens)
	}
}

// pastLimit counts the grants of contend whose node's sequence was past the
// limit (2147483647 or negative), negative those with a negative one (a
// create the server prepared while another was in flight).
var pastLimit, negative atomic.Int64

// contend runs the recipe acquire gives for each of workers, rounds times
// each, and fails the test with what onGrant reports: it is called on every
// grant, and the exit it returns just before the Release.
func contend(t *testing.T, workers, rounds int, acquire func(w int) func(context.Context) (recipe.Lease, error), onGrant func(w int) (exit func(), err error)) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		a := acquire(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				l, err := a(ctx)
				cancel()
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if seq := suffix(t, path.Base(l.(interface{ Path() string }).Path())); seq == math.MaxInt32 || seq < 0 {
					pastLimit.Add(1)
					if seq < 0 {
						negative.Add(1)
					}
				}
				exit, err := onGrant(w)
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				exit()
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("worker %d: release: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSequenceLimitContention: mutex, semaphore and read-write lock, each
// with sessions acquiring and releasing at once across the limit (creates
// pipelined behind one another may get the negative sequences of the
// server's pending change): never more holders than the recipe allows.
func TestSequenceLimitContention(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	dirs := []string{"/limit/c/mutex", "/limit/c/sem", "/limit/c/rw"}
	cl := limitCluster(t, 20, dirs...)
	in := zktest.Inspect(t, cl)
	const workers, rounds = 6, 15
	sessions := make([]*zookeeper.Session, workers)
	for i := range sessions {
		sessions[i] = rtest.Connect(t, cl)
	}
	t.Run("mutex", func(t *testing.T) {
		var holders atomic.Int32
		contend(t, workers, rounds, func(w int) func(context.Context) (recipe.Lease, error) {
			m, err := mutex.New(sessions[w], dirs[0])
			if err != nil {
				t.Fatal(err)
			}
			return m.Acquire
		}, func(int) (func(), error) {
			var err error
			if h := holders.Add(1); h != 1 {
				err = fmt.Errorf("%d mutex holders at once", h)
			}
			return func() { holders.Add(-1) }, err
		})
	})
	t.Run("semaphore", func(t *testing.T) {
		var holders atomic.Int32
		contend(t, workers, rounds, func(w int) func(context.Context) (recipe.Lease, error) {
			s, err := mutex.NewSemaphore(sessions[w], dirs[1], 2)
			if err != nil {
				t.Fatal(err)
			}
			return s.Acquire
		}, func(int) (func(), error) {
			var err error
			if h := holders.Add(1); h > 2 {
				err = fmt.Errorf("%d holders of a 2-lease semaphore at once", h)
			}
			return func() { holders.Add(-1) }, err
		})
	})
	t.Run("rwlock", func(t *testing.T) {
		var mu sync.Mutex
		readers, writers := 0, 0
		contend(t, workers, rounds, func(w int) func(context.Context) (recipe.Lease, error) {
			rw, err := mutex.NewRW(sessions[w], dirs[2])
			if err != nil {
				t.Fatal(err)
			}
			if w%3 == 0 {
				return rw.WriteLock().Acquire
			}
			return rw.ReadLock().Acquire
		}, func(w int) (func(), error) {
			mu.Lock()
			defer mu.Unlock()
			var err error
			if w%3 == 0 {
				writers++
				if writers != 1 || readers != 0 {
					err = fmt.Errorf("a writer granted beside %d writers and %d readers", writers-1, readers)
				}
				return func() { mu.Lock(); writers--; mu.Unlock() }, err
			}
			readers++
			if writers != 0 {
				err = fmt.Errorf("a reader granted beside a writer")
			}
			return func() { mu.Lock(); readers--; mu.Unlock() }, err
		})
	})
	if p := pastLimit.Load(); p < workers*rounds {
		t.Errorf("%d of %d grants past the limit: the contention stayed below it", p, 3*workers*rounds)
	}
	t.Logf("%d of %d grants past the limit, %d of them with a negative sequence", pastLimit.Load(), 3*workers*rounds, negative.Load())
	for _, d := range dirs {
		if left := in.Children(d); len(left) != 0 {
			t.Errorf("%s: nodes left behind: %v", d, left)
		}
	}
}

// TestSequenceLimitDowngrade: RWMutex.Downgrade keeps the writer's place
// when the writer is below the limit and the nodes behind it are past it
// (the read node's own sequence stuck too): the waiting writer is not
// granted until the downgraded read is released. With the write node past
// the limit, Downgrade is ErrSequenceLimit and loses nothing.
func TestSequenceLimitDowngrade(t *testing.T) {
	t.Parallel() // on the seeded server limitCluster shares, in directories of its own
	const dir = "/limit/rw"
	cl := limitCluster(t, 2, dir)
	in := zktest.Inspect(t, cl)
	rws := make([]*mutex.RWMutex, 3)
	for i := range rws {
		rw, err := mutex.NewRW(rtest.Connect(t, cl), dir)
		if err != nil {
			t.Fatal(err)
		}
		rws[i] = rw
	}
	w, err := rws[0].WriteLock().Acquire(t.Context()) // 2147483645
	if err != nil {
		t.Fatal(err)
	}
	chs := queueUp(t, in, dir, 1, []func(context.Context) (recipe.Lease, error){
		rws[1].WriteLock().Acquire, // 2147483646
		rws[2].WriteLock().Acquire, // 2147483647
	})
	r, err := rws[0].Downgrade(t.Context(), w) // its own sequence: 2147483647 again
	if err != nil {
		t.Fatalf("Downgrade below the limit: %v", err)
	}
	if got := stuckCount(t, in, dir); got < 2 {
		t.Fatalf("%d nodes with sequence 2147483647, want 2 (children %v)", got, in.Children(dir))
	}
	if err := w.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	noneGranted(t, 300*time.Millisecond, "writers while the downgraded read holds", chs...)
	if err := r.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	w1 := rtest.Await(t, chs[0], 10*time.Second)
	if w1.Err != nil {
		t.Fatal(w1.Err)
	}
	noneGranted(t, 100*time.Millisecond, "the second writer beside the first", chs[1])
	if err := w1.Lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	w2 := rtest.Await(t, chs[1], 10*time.Second)
	if w2.Err != nil {
		t.Fatal(w2.Err)
	}
	// w2's node is past the limit: its position cannot anchor a read.
	before := in.Children(dir)
	_, err = rws[2].Downgrade(t.Context(), w2.Lease)
	if !errors.Is(err, zookeeper.ErrSequenceLimit) {
		t.Fatalf("Downgrade past the limit: %v, want ErrSequenceLimit", err)
	}
	if w2.Lease.Context().Err() != nil {
		t.Fatal("the write lease ended with the refused Downgrade")
	}
	if after := in.Children(dir); !slices.Equal(before, after) {
		t.Fatalf("the refused Downgrade changed the directory: %v -> %v", before, after)
	}
	if err := w2.Lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
