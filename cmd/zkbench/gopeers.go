package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// sessionTimeout is asked for by every client of every peer.
const sessionTimeout = 10 * time.Second

// goClient is one ZooKeeper session of an in-process peer.
type goClient interface {
	newLock(path string) (goLock, error)
	close()
}

// goLock is one contender: lock blocks until held and returns the unlock.
type goLock interface {
	lock(ctx context.Context) (unlock func() error, err error)
}

// goPeer runs the workloads in this process for one Go lock implementation.
type goPeer struct {
	name    string
	servers []string // ZooKeeper's host:port; none for the other backends' peers
	spread  bool     // spread client source addresses over 127.0.1.x
	meter   meter    // samples the measured phase
	connect func(ctx context.Context, servers []string, dial zk.Dialer) (goClient, error)
}

func (p *goPeer) Name() string { return p.name }
func (p *goPeer) Close() error { return nil }

// Waiters reports whether p runs the waiters workloads, which watch the
// queue in ZooKeeper: the ZooKeeper peers only.
func (p *goPeer) Waiters() bool { return len(p.servers) > 0 }

// dialSeq numbers the connections of every Go peer, for spreadDial.
var dialSeq atomic.Int64

// spreadDial binds each connection to a source address 127.0.1.x, 40
// connections per address, so that 1000 sessions stay under ZooKeeper's
// per-address connection limit (maxClientCnxns, 60 by default).
func spreadDial(network, address string, timeout time.Duration) (net.Conn, error) {
	n := dialSeq.Add(1)
	ip := net.IPv4(127, 0, 1, byte(1+(n/40)%250))
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: ip}}
	return d.Dial(network, address)
}

func (p *goPeer) dialer() zk.Dialer {
	if p.spread {
		return spreadDial
	}
	return net.DialTimeout
}

// oursPeer is this module's mutex, connecting to servers; m samples its
// phases (its clientPID is this process).
func oursPeer(servers []string, spread bool, m meter) *goPeer {
	return &goPeer{name: "ours", servers: servers, spread: spread, meter: m,
		connect: func(ctx context.Context, servers []string, dial zk.Dialer) (goClient, error) {
			s, err := zookeeper.Connect(ctx, servers, zookeeper.WithSessionTimeout(sessionTimeout),
				zookeeper.WithDialer(dial), zookeeper.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				return nil, err
			}
			return oursClient{s}, nil
		}}
}

type oursClient struct{ s *zookeeper.Session }

func (c oursClient) close() { c.s.Close() }
func (c oursClient) newLock(path string) (goLock, error) {
	m, err := mutex.New(c.s, path)
	if err != nil {
		return nil, err
	}
	return leaseLock{m}, nil
}

// leaseLock is a recipe.Lock: ours, or another backend's.
type leaseLock struct{ l recipe.Lock }

func (l leaseLock) lock(ctx context.Context) (func() error, error) {
	lease, err := l.l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return lease.Release(context.Background()) }, nil
}

// zkPeer is go-zookeeper's built-in zk.Lock, as oursPeer.
func zkPeer(servers []string, spread bool, m meter) *goPeer {
	return &goPeer{name: "zk", servers: servers, spread: spread, meter: m,
		connect: func(ctx context.Context, servers []string, dial zk.Dialer) (goClient, error) {
			conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithDialer(dial),
				zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
			if err != nil {
				return nil, err
			}
			// The first request waits for the session.
			if _, _, err := conn.Exists("/"); err != nil {
				conn.Close()
				return nil, err
			}
			return zkClient{conn}, nil
		}}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

type zkClient struct{ c *zk.Conn }

func (c zkClient) close() { c.c.Close() }
func (c zkClient) newLock(path string) (goLock, error) {
	return zkLock{zk.NewLock(c.c, path, zk.WorldACL(zk.PermAll))}, nil
}

type zkLock struct{ l *zk.Lock }

// lock ignores ctx: zk.Lock cannot be cancelled (closing its Conn ends it).
func (l zkLock) lock(context.Context) (func() error, error) {
	if err := l.l.Lock(); err != nil {
		return nil, err
	}
	return l.l.Unlock, nil
}

// packets returns zk_packets_received + zk_packets_sent of the server.
func packets(ctx context.Context, addr string) (int64, error) {
	m, err := zktest.Mntr(ctx, addr)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, k := range []string{"zk_packets_received", "zk_packets_sent"} {
		v, err := strconv.ParseInt(m[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("mntr %s: %q", k, m[k])
		}
		sum += v
	}
	return sum, nil
}

// connectN opens n sessions, 16 at a time.
func (p *goPeer) connectN(ctx context.Context, n int) ([]goClient, error) {
	out := make([]goClient, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = p.connect(ctx, p.servers, p.dialer())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(out)
		return nil, err
	}
	return out, nil
}

func closeAll(cs []goClient) {
	for _, c := range cs {
		if c != nil {
			c.close()
		}
	}
}

// Run runs one workload.
func (p *goPeer) Run(ctx context.Context, s Spec) Result {
	r := Result{Type: "run", Peer: p.name, Workload: s.Name(), HeapPerWaiter: -1}
	var err error
	if s.Kind == "loop" {
		err = p.loop(ctx, s, &r)
	} else {
		err = p.waiters(ctx, s, &r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// loop: s.Clients sessions, each acquire → critical section → release until
// s.Duration has passed.
func (p *goPeer) loop(ctx context.Context, s Spec, r *Result) error {
	clients, err := p.connectN(ctx, s.Clients)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	locks := make([]goLock, len(clients))
	for i, c := range clients {
		if locks[i], err = c.newLock(s.Path); err != nil {
			return err
		}
	}
	var (
		holders, overlaps atomic.Int32
		mu                sync.Mutex
		lat               []time.Duration
		firstErr          error
		wg                sync.WaitGroup
	)
	before, err := p.meter.begin(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(s.Duration)
	for _, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1024)
			var err error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				var unlock func() error
				if unlock, err = l.lock(ctx); err != nil {
					break
				}
				mine = append(mine, time.Since(t0))
				if holders.Add(1) > 1 { // the critical section
					overlaps.Add(1)
				}
				holders.Add(-1)
				if err = unlock(); err != nil {
					break
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	ph, err := p.meter.end(ctx, before)
	if err != nil {
		return err
	}
	r.finish(lat, elapsed, ph)
	r.Overlaps = int(overlaps.Load())
	return firstErr
}

// waiters runs s.Cycles cycles (fewer if s.Duration, a cap on the wall
// time, passes first; at least one) on the same sessions: the holder's,
// and the waiters' (one each, or one for all), connected once. Each cycle
// is waitersCycle. The result adds up the cycles' hand-offs, hand-off
// times and metered phases; the heap per waiter is the first cycle's.
func (p *goPeer) waiters(ctx context.Context, s Spec, r *Result) error {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	hc, err := p.connectN(ctx, 1)
	if err != nil {
		return err
	}
	defer closeAll(hc)
	obs, _, err := zk.Connect(p.servers, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer obs.Close()
	w := &waitersRun{p: p, s: s, holder: hc[0], obs: obs, sum: phase{}}
	// On any exit, closing the sessions ends waiters that can't be
	// cancelled; then their goroutines end.
	defer func() { closeAll(w.clients); w.wg.Wait() }()
	for c := range max(1, s.Cycles) {
		if c > 0 && s.Duration > 0 && time.Since(t0) >= s.Duration {
			r.Capped = true
			break
		}
		if err := w.cycle(ctx, r); err != nil {
			return err
		}
		r.Cycles++
	}
	r.finish(w.lat, w.handoff, w.sum)
	r.Overlaps = int(w.overlaps.Load())
	return nil
}

// waitersRun is the state of a waiters workload across its cycles.
type waitersRun struct {
	p       *goPeer
	s       Spec
	holder  goClient   // the holder's session
	clients []goClient // the waiters' sessions, connected in the first cycle
	obs     *zk.Conn   // lists the queue

	wg       sync.WaitGroup // the waiters' goroutines
	overlaps atomic.Int32
	lat      []time.Duration // every hand-off's latency
	handoff  time.Duration   // the sum of the cycles' hand-off times
	sum      phase           // the sum of the cycles' metered phases
}

// cycle runs one cycle: the holder acquires (with a new lock object, as
// every waiter: no state is left from the previous cycle), W contenders
// queue behind it (in the first cycle, the waiters' sessions are connected
// here and the heap they and their waits take is measured), and once the
// observer lists all W+1 nodes the hand-off phase starts: the holder
// releases and each waiter releases as soon as it holds. The phase, hand-off
// time and meter, ends when the last waiter's acquire returns; that waiter
// releases only after the meter has sampled. The cycle returns once every
// waiter has released.
func (w *waitersRun) cycle(ctx context.Context, r *Result) error {
	first := w.clients == nil
	hl, err := w.holder.newLock(w.s.Path)
	if err != nil {
		return err
	}
	unlockHolder, err := hl.lock(ctx)
	if err != nil {
		return err
	}
	var m0, m1 runtime.MemStats
	if first {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m0)
		n := w.s.Waiters
		if w.s.Shared {
			n = 1
		}
		if w.clients, err = w.p.connectN(ctx, n); err != nil {
			return err
		}
	}
	locks := make([]goLock, w.s.Waiters)
	for i := range locks {
		if locks[i], err = w.clients[i%len(w.clients)].newLock(w.s.Path); err != nil {
			return err
		}
	}
	h := w.startWaiters(ctx, locks)
	if err := w.awaitQueued(ctx, h); err != nil {
		return err
	}
	if first {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		r.HeapPerWaiter = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(w.s.Waiters)
	}
	if err := w.handOff(ctx, h, unlockHolder); err != nil {
		return err
	}
	w.lat = append(w.lat, h.lat...)
	return h.err()
}

// handoffs is one cycle's waiters: their goroutines and what they record.
// The timestamps are monotonic offsets from base.
type handoffs struct {
	n           int
	base        time.Time
	lastRelease atomic.Int64  // when the previous holder began releasing
	lastAcquire time.Duration // when the last waiter's acquire returned (written before allHeld closes)
	acquired    atomic.Int32
	holders     atomic.Int32
	allHeld     chan struct{} // closed by the last waiter to hold
	sampled     chan struct{} // closed once the phase's end is sampled
	done        chan struct{} // closed when every waiter has released (or failed)

	mu       sync.Mutex
	lat      []time.Duration
	firstErr error
}

func (h *handoffs) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.firstErr
}

// startWaiters starts one goroutine per lock: acquire, record the hand-off
// latency and any overlap, release (the last one after the phase's end was
// sampled).
func (w *waitersRun) startWaiters(ctx context.Context, locks []goLock) *handoffs {
	h := &handoffs{n: len(locks), base: time.Now(), allHeld: make(chan struct{}), sampled: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Add(1)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer wg.Done()
			if err := w.waiter(ctx, h, l); err != nil {
				h.mu.Lock()
				if h.firstErr == nil {
					h.firstErr = err
				}
				h.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(h.done) }()
	return h
}

// waiter is one waiter of a cycle.
func (w *waitersRun) waiter(ctx context.Context, h *handoffs, l goLock) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	now := time.Since(h.base)
	if h.holders.Add(1) > 1 {
		w.overlaps.Add(1)
	}
	h.holders.Add(-1)
	h.mu.Lock()
	h.lat = append(h.lat, now-time.Duration(h.lastRelease.Load()))
	h.mu.Unlock()
	if int(h.acquired.Add(1)) == h.n {
		h.lastAcquire = now
		close(h.allHeld)
		select { // released after the sample, as the others before it
		case <-h.sampled:
		case <-ctx.Done():
		}
	}
	h.lastRelease.Store(int64(time.Since(h.base)))
	return unlock()
}

// awaitQueued polls the observer until all the cycle's waiters are listed.
func (w *waitersRun) awaitQueued(ctx context.Context, h *handoffs) error {
	for {
		children, _, err := w.obs.Children(w.s.Path)
		if err != nil {
			return err
		}
		if len(children) >= w.s.Waiters+1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d waiters queued: %w", len(children)-1, w.s.Waiters, ctx.Err())
		case <-h.done:
			return fmt.Errorf("waiters ended before they queued: %w", h.err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// handOff is the measured phase: the holder releases, the meter samples
// when the last waiter holds; then every waiter's release is awaited.
func (w *waitersRun) handOff(ctx context.Context, h *handoffs, unlockHolder func() error) error {
	before, err := w.p.meter.begin(ctx)
	if err != nil {
		return err
	}
	start := time.Since(h.base)
	h.lastRelease.Store(int64(start))
	if err := unlockHolder(); err != nil {
		return err
	}
	select {
	case <-h.allHeld:
		ph, err := w.p.meter.end(ctx, before)
		close(h.sampled)
		if err != nil {
			return err
		}
		w.sum = w.sum.add(ph)
		w.handoff += h.lastAcquire - start
	case <-h.done: // a waiter failed: no phase
	case <-ctx.Done():
		return fmt.Errorf("hand-offs not done: %w", ctx.Err())
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return fmt.Errorf("releases not done: %w", ctx.Err())
	}
	return nil
}
