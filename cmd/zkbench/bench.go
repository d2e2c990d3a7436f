package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// bench is one zkbench run's set-up: the servers (started or given), the
// latency proxy, the meter, the peers, and the znode root their workloads
// use. close undoes the set-up in reverse order, whatever part of it was
// made.
type bench struct {
	o       options
	root    string // under which every workload's lock directory goes
	peers   []peer
	closers []func()
}

func (b *bench) onClose(f func()) { b.closers = append(b.closers, f) }

func (b *bench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// setUp starts (or finds) the server and the proxy, calibrates the meter
// and starts the peers.
func (b *bench) setUp(ctx context.Context) error {
	o := b.o
	addrs, serverPID, err := b.server(ctx)
	if err != nil {
		return err
	}
	spread := o.spread == "true" || (o.spread == "auto" && loopback(addrs))
	logf("ZooKeeper at %s; client source addresses spread: %t", strings.Join(addrs, ","), spread)
	// The ZooKeeper peers connect to zkAddrs: the servers, or the latency
	// proxy in front of them (which keeps each client's source address on
	// loopback, so spreading still works). mntr goes to the server itself.
	zkAddrs := addrs
	if o.latency > 0 {
		proxied, stopProxy, err := startProxy(ctx, addrs, o.latency)
		if err != nil {
			return err
		}
		b.onClose(stopProxy)
		zkAddrs = proxied
		logf("ZooKeeper peers connect through a proxy process at %s adding %v each way", strings.Join(zkAddrs, ","), o.latency)
	}
	m := meter{mntr: addrs[0], clientPID: os.Getpid(), serverPID: serverPID}
	if mn, err := zktest.Mntr(ctx, addrs[0]); err == nil {
		logf("server %s, %d cores, GOMAXPROCS %d", mn["zk_version"], runtime.NumCPU(), runtime.GOMAXPROCS(0))
	} else {
		return fmt.Errorf("mntr (four-letter words must be allowed): %w", err)
	}
	if err := m.calibrate(ctx); err != nil {
		return err
	}
	logf("one mntr exchange counts %d packets: subtracted from every phase", m.mntrPackets)
	if err := b.makeRoot(addrs); err != nil {
		return err
	}
	return b.startPeers(ctx, zkAddrs, spread, m)
}

// server returns the ZooKeeper addresses (-servers, or a server zktest
// starts) and the server's pid (0 when unknown: no server CPU column).
func (b *bench) server(ctx context.Context) ([]string, int, error) {
	addrs := splitList(b.o.servers)
	if len(addrs) > 0 {
		logf("no server CPU column: the server is not a process zkbench started")
		for _, a := range addrs {
			if strings.Contains(a, "/") {
				return nil, 0, fmt.Errorf("server %q: give host:port without chroot", a)
			}
		}
		return addrs, 0, nil
	}
	logf("no ZK_SERVERS given: starting a local ZooKeeper (zktest, tickTime 2s)")
	cl, err := zktest.Launch(ctx, zktest.WithTickTime(2*time.Second), zktest.WithFullJIT())
	if err != nil {
		return nil, 0, err
	}
	b.onClose(func() { cl.Close() })
	pid, err := cl.ServerPID(0)
	if err != nil {
		logf("no server CPU column: %v", err)
	}
	return cl.Addrs(), pid, nil
}

// makeRoot picks the run's znode root and arranges for its deletion.
func (b *bench) makeRoot(addrs []string) error {
	obs, _, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	b.root = fmt.Sprintf("/zkbench/%d", time.Now().UnixNano())
	root := b.root
	b.onClose(func() {
		if err := deleteAll(obs, root); err != nil {
			logf("cleanup of %s: %v", root, err)
		}
		obs.Close()
	})
	return nil
}

// startPeers starts o.peers in order; a Java or Python peer that is not
// installed is skipped.
func (b *bench) startPeers(ctx context.Context, zkAddrs []string, spread bool, m meter) error {
	tmp, err := os.MkdirTemp("", "zkbench-")
	if err != nil {
		return err
	}
	b.onClose(func() { os.RemoveAll(tmp) })
	b.onClose(func() {
		for _, p := range b.peers {
			p.Close()
		}
	})
	for _, name := range b.o.peers {
		switch name {
		case "ours":
			b.peers = append(b.peers, oursPeer(zkAddrs, spread, m))
		case "zk":
			b.peers = append(b.peers, zkPeer(zkAddrs, spread, m))
		case "curator", "kazoo":
			logf("starting the %s driver", name)
			p, err := startExt(ctx, name, tmp, b.o.python, strings.Join(zkAddrs, ","), spread, m)
			if err != nil {
				logf("SKIPPING peer %s: %v", name, err)
				continue
			}
			b.peers = append(b.peers, p)
		case "etcd", "pg", "redis", "k8s":
			logf("starting the %s server (its test harness)", name)
			p, stop, err := startBackendPeer(ctx, name, b.root)
			if err != nil {
				return fmt.Errorf("peer %s: %w", name, err)
			}
			b.onClose(stop)
			b.peers = append(b.peers, p)
		default:
			return fmt.Errorf("unknown peer %q (want %s)", name, strings.Join(knownPeers, ", "))
		}
	}
	if len(b.peers) == 0 {
		return errors.New("no peer to measure")
	}
	return nil
}

// warmUp runs every peer uncontended and with 8 clients, unrecorded: the
// server's JIT and every peer's. -warmup 0 skips it.
func (b *bench) warmUp(ctx context.Context) {
	if b.o.warmup <= 0 {
		return
	}
	for _, p := range b.peers {
		for _, c := range []int{1, 8} {
			s := Spec{Kind: "loop", Clients: c, Duration: b.o.warmup / 2, Path: path.Join(b.root, "warmup", p.Name(), fmt.Sprint(c))}
			r := p.Run(ctx, s)
			logf("warm-up %-7s %-12s %8.0f acq/s %s", p.Name(), s.Name(), r.AcqPerS, r.Error)
		}
	}
}

// measure runs the rounds, every workload on every peer, the peer order
// rotated by one per round, emitting each result; it returns the medians,
// by workload then peer.
func (b *bench) measure(ctx context.Context, emit func(Result)) ([]Result, error) {
	o := b.o
	results := map[string][]Result{} // by workload + "/" + peer
	specs := o.specs()
	for round := range o.rounds {
		order := slices.Concat(b.peers[round%len(b.peers):], b.peers[:round%len(b.peers)])
		for _, s := range specs {
			for _, p := range order {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if s.Kind == "waiters" && !p.Waiters() {
					continue
				}
				s.Path = path.Join(b.root, p.Name(), fmt.Sprintf("%s-r%d", s.Name(), round+1))
				r := p.Run(ctx, s)
				r.Round = round + 1
				if !isBackendPeer(p.Name()) {
					r.LatencyMs = float64(o.latency) / float64(time.Millisecond)
				}
				emit(r)
				if r.Error != "" {
					logf("round %d %-7s %-16s ERROR: %s", r.Round, p.Name(), s.Name(), r.Error)
					continue
				}
				logf("round %d %-7s %-16s %8.0f acq/s  p50 %7.2f ms  p99 %7.2f ms  %5.1f pkts/acq  cpu %s/%s µs/acq%s", r.Round, p.Name(), s.Name(),
					r.AcqPerS, r.P50us/1000, r.P99us/1000, max(r.PacketsPerAcq, 0), cpuCell(r.ClientCPUus), cpuCell(r.ServerCPUus), cyclesNote(r, s))
				results[s.Name()+"/"+p.Name()] = append(results[s.Name()+"/"+p.Name()], r)
			}
		}
	}
	var meds []Result
	for _, s := range specs {
		for _, p := range b.peers {
			if rs := results[s.Name()+"/"+p.Name()]; len(rs) > 0 {
				m := median(rs)
				emit(m)
				meds = append(meds, m)
			}
		}
	}
	return meds, nil
}
