package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Fault kinds of the engine (every target) and of ZooKeeper's target.
const (
	FaultKillServer  = "kill-server"      // ZooKeeper: SIGKILL a random server, restart it after a while
	FaultStopServer  = "stop-server"      // ZooKeeper: SIGTERM a random server, restart it after a while
	FaultKillLeader  = "kill-leader"      // ZooKeeper: SIGKILL the current leader, restart it after a while
	FaultPauseServer = "pause-server"     // ZooKeeper: SIGSTOP a random server, SIGCONT after a while
	FaultCut         = "cut-client"       // close a client's connections and refuse dials for a while
	FaultBlackhole   = "blackhole-client" // forward nothing for 0.3 to 1.6 session timeouts
	FaultLatency     = "latency-client"   // add 10 to 400 ms each way for a while
	FaultExpire      = "expire-session"   // ZooKeeper: expire a client's session on demand
	FaultDeleteDir   = "delete-dir"       // ZooKeeper: delete the recipe's directory under live participants
)

// ServerFaults and ClientFaults list ZooKeeper's kinds: its server faults
// (which need a cluster whose servers can be controlled: zktest.Start with
// a local install), and the rest (the generic client faults, session
// expiry and the deletion of the directory).
var (
	ServerFaults = []string{FaultKillServer, FaultStopServer, FaultKillLeader, FaultPauseServer}
	ClientFaults = []string{FaultCut, FaultBlackhole, FaultLatency, FaultPauseClient, FaultExpire, FaultDeleteDir}
)

// FaultNames lists the kinds a run on t can inject: the generic ones, then
// t's own.
func FaultNames(t Target) []string {
	names := append([]string(nil), GenericFaults...)
	for _, k := range t.Faults() {
		names = append(names, k.Name)
	}
	return names
}

type nemesis struct {
	w     *workload
	T     time.Duration
	mean  time.Duration
	kinds []FaultKind
	rng   *rand.Rand
	logf  func(string, ...any)

	wg         sync.WaitGroup
	mu         sync.Mutex
	faults     []Fault
	serverBusy bool
	storeBusy  bool
	clientBusy map[int]bool
}

func newNemesis(w *workload, kinds []FaultKind, cfg Config, T time.Duration) *nemesis {
	return &nemesis{w: w, T: T, mean: cfg.FaultEvery, kinds: kinds,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973)), logf: cfg.Logf, clientBusy: map[int]bool{}}
}

// between draws a duration uniformly in [lo, hi) from rng.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// run injects faults until ctx ends, then waits until every fault is
// undone. A client fault goes to a free client (pick). All the schedule's random choices are drawn here, in order,
// whether or not the fault can be injected (a busy target skips it), and
// each fault gets a generator of its own seeded from them, so that the
// schedule of choices depends on the seed only.
//
// The first len(kinds) faults are a tour: every kind once, in an order drawn
// from the seed, each waiting for its target to be free instead of being
// skipped, so that a run tries every kind once its fault phase is long
// enough for the tour (a server fault waits for the previous restart).
func (n *nemesis) run(ctx context.Context) {
	tour := n.rng.Perm(len(n.kinds))
	for i := 0; ; i++ {
		wait := min(time.Duration(n.rng.ExpFloat64()*float64(n.mean)), 4*n.mean)
		k := n.kinds[n.rng.IntN(len(n.kinds))]
		touring := i < len(tour)
		if touring {
			k = n.kinds[tour[i]]
		}
		client := n.rng.IntN(len(n.w.clients))
		d := between(n.rng, 300*time.Millisecond, 2500*time.Millisecond)
		seed := n.rng.Uint64()
		pause(ctx, wait)
		client = n.pick(k, client)
		if touring {
			n.awaitFree(ctx, k, client)
		}
		if ctx.Err() != nil {
			break
		}
		n.inject(ctx, k, client, d, seed)
	}
	n.wg.Wait()
}

// pick chooses the client of a fault of kind k drawn for client ci: the
// first client from ci on (cyclically) that no other fault holds, and for
// pause-client the first such that holds a grant, if one does; ci if all
// are busy. Other kinds keep ci.
func (n *nemesis) pick(k FaultKind, ci int) int {
	if k.Scope != ScopeClient {
		return ci
	}
	var held map[int]bool
	if k.Name == FaultPauseClient {
		held = n.w.rec.holders()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	free := -1
	for j := range len(n.w.clients) {
		i := (ci + j) % len(n.w.clients)
		if n.clientBusy[i] {
			continue
		}
		if held == nil || held[i] {
			return i
		}
		if free < 0 {
			free = i
		}
	}
	if free < 0 {
		return ci
	}
	return free
}

// busyLocked reports whether a fault of kind k on client ci cannot be injected
// now; n.mu is held.
func (n *nemesis) busyLocked(k FaultKind, ci int) bool {
	if k.Busy != nil && k.Busy() {
		return true
	}
	switch k.Scope {
	case ScopeServer:
		return n.serverBusy
	case ScopeStore:
		return n.storeBusy
	}
	return n.clientBusy[ci]
}

func (n *nemesis) setBusyLocked(k FaultKind, ci int, busy bool) {
	switch k.Scope {
	case ScopeServer:
		n.serverBusy = busy
	case ScopeStore:
		n.storeBusy = busy
	default:
		if busy {
			n.clientBusy[ci] = true
		} else {
			delete(n.clientBusy, ci)
		}
	}
}

// awaitFree waits until a fault of kind k on client ci can be injected, or
// ctx ends.
func (n *nemesis) awaitFree(ctx context.Context, k FaultKind, ci int) {
	for ctx.Err() == nil {
		n.mu.Lock()
		busy := n.busyLocked(k, ci)
		n.mu.Unlock()
		if !busy {
			return
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// inject injects a fault of kind k (on client ci for a client fault) on a
// goroutine of its own, unless its scope is busy, and records it once
// Inject returns.
func (n *nemesis) inject(ctx context.Context, k FaultKind, ci int, d time.Duration, seed uint64) {
	n.mu.Lock()
	if n.busyLocked(k, ci) {
		n.mu.Unlock()
		return
	}
	n.setBusyLocked(k, ci, true)
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f := Fault{Kind: k.Name, Client: -1, Start: n.w.rec.now()}
		if k.Scope == ScopeClient {
			f.Client = ci
		}
		k.Inject(ctx, &f, d, rand.New(rand.NewPCG(seed, uint64(ci))))
		f.End = n.w.rec.now()
		if f.Err != "" && k.Scope == ScopeServer {
			n.logf("nemesis: %s %s: %s", f.Kind, f.Target, f.Err)
		}
		n.mu.Lock()
		n.faults = append(n.faults, f)
		n.setBusyLocked(k, ci, false)
		n.mu.Unlock()
	}()
}

func (n *nemesis) snapshot() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Fault(nil), n.faults...)
}

// genericFaults are the client faults of every target, through each
// client's proxy.
func (w *workload) genericFaults(T time.Duration) []FaultKind {
	proxy := func(f *Fault) *client {
		f.Target = fmt.Sprintf("client %d", f.Client)
		return w.clients[f.Client]
	}
	return []FaultKind{
		{Name: FaultCut, Scope: ScopeClient, Inject: func(ctx context.Context, f *Fault, d time.Duration, _ *rand.Rand) {
			c := proxy(f)
			c.proxy.Cut()
			pause(ctx, d)
			c.proxy.Resume()
		}},
		{Name: FaultBlackhole, Scope: ScopeClient, Inject: func(ctx context.Context, f *Fault, _ time.Duration, rng *rand.Rand) {
			proxy(f).proxy.BlackholeFor(ctx, between(rng, T*3/10, T*16/10))
		}},
		{Name: FaultLatency, Scope: ScopeClient, Inject: func(ctx context.Context, f *Fault, d time.Duration, rng *rand.Rand) {
			c, lat := proxy(f), between(rng, 10*time.Millisecond, 400*time.Millisecond)
			c.proxy.SetLatency(lat)
			f.Target += fmt.Sprintf(" +%v", lat.Round(time.Millisecond))
			pause(ctx, d)
			c.proxy.SetLatency(0)
		}},
		{Name: FaultPauseClient, Scope: ScopeClient, Inject: func(ctx context.Context, f *Fault, _ time.Duration, rng *rand.Rand) {
			c, d := proxy(f), between(rng, T*12/10, T*2)
			f.Target += fmt.Sprintf(" for %v", d.Round(time.Millisecond))
			c.freezeFor(d)
			c.proxy.BlackholeFor(ctx, d)
			c.thaw()
		}},
	}
}

// heal undoes the client faults left: every proxy forwards without
// latency, no client is frozen.
func (w *workload) heal() {
	for _, c := range w.clients {
		c.thaw()
		c.proxy.Resume()
		c.proxy.SetLatency(0)
	}
}
