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
	"github.com/zkrecipes/zkrecipes/zktest"
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
			s, err := recipe.Connect(ctx, servers, recipe.WithSessionTimeout(sessionTimeout),
				recipe.WithDialer(dial), recipe.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				return nil, err
			}
			return oursClient{s}, nil
		}}
}

type oursClient struct{ s *recipe.Session }

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

// waiters: a holder, s.Waiters contenders queued behind it (on one session or
// one each), then the holder releases and every waiter releases as soon as it
// holds: s.Waiters hand-offs.
func (p *goPeer) waiters(ctx context.Context, s Spec, r *Result) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	hc, err := p.connectN(ctx, 1)
	if err != nil {
		return err
	}
	defer closeAll(hc)
	hl, err := hc[0].newLock(s.Path)
	if err != nil {
		return err
	}
	unlockHolder, err := hl.lock(ctx)
	if err != nil {
		return err
	}
	obs, _, err := zk.Connect(p.servers, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer obs.Close()

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var clients []goClient
	if s.Shared {
		clients, err = p.connectN(ctx, 1)
	} else {
		clients, err = p.connectN(ctx, s.Waiters)
	}
	if err != nil {
		return err
	}
	// On any exit, closing the sessions ends waiters that can't be cancelled.
	var wg sync.WaitGroup
	defer func() { closeAll(clients); wg.Wait() }()
	locks := make([]goLock, s.Waiters)
	for i := range locks {
		if locks[i], err = clients[i%len(clients)].newLock(s.Path); err != nil {
			return err
		}
	}
	var (
		lastRelease atomic.Int64 // unix ns when the previous holder began releasing
		holders     atomic.Int32
		overlaps    atomic.Int32
		mu          sync.Mutex
		lat         []time.Duration
		firstErr    error
	)
	for _, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.lock(ctx)
			if err == nil {
				now := time.Now()
				if holders.Add(1) > 1 {
					overlaps.Add(1)
				}
				holders.Add(-1)
				mu.Lock()
				lat = append(lat, now.Sub(time.Unix(0, lastRelease.Load())))
				mu.Unlock()
				lastRelease.Store(time.Now().UnixNano())
				err = unlock()
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for {
		children, _, err := obs.Children(s.Path)
		if err != nil {
			return err
		}
		if len(children) >= s.Waiters+1 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d waiters queued: %w", len(children)-1, s.Waiters, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	r.HeapPerWaiter = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(s.Waiters)

	before, err := p.meter.begin(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	lastRelease.Store(start.UnixNano())
	if err := unlockHolder(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("hand-offs not done: %w", ctx.Err())
	}
	elapsed := time.Since(start)
	ph, err := p.meter.end(ctx, before)
	if err != nil {
		return err
	}
	r.finish(lat, elapsed, ph)
	r.Overlaps = int(overlaps.Load())
	return firstErr
}
