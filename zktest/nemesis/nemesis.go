package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Fault kinds.
const (
	FaultKillServer  = "kill-server"      // SIGKILL a random server, restart it after a while
	FaultStopServer  = "stop-server"      // SIGTERM a random server, restart it after a while
	FaultKillLeader  = "kill-leader"      // SIGKILL the current leader, restart it after a while
	FaultPauseServer = "pause-server"     // SIGSTOP a random server, SIGCONT after a while
	FaultCut         = "cut-client"       // close a client's connections and refuse dials for a while
	FaultBlackhole   = "blackhole-client" // forward nothing for 0.3 to 1.6 session timeouts
	FaultLatency     = "latency-client"   // add 10 to 400 ms each way for a while
	FaultExpire      = "expire-session"   // expire a client's session on demand
	FaultDeleteDir   = "delete-dir"       // delete the recipe's directory under live participants
)

// ServerFaults and ClientFaults list the kinds; server faults need a
// cluster whose servers can be controlled (zktest.Start with a local
// install).
var (
	ServerFaults = []string{FaultKillServer, FaultStopServer, FaultKillLeader, FaultPauseServer}
	ClientFaults = []string{FaultCut, FaultBlackhole, FaultLatency, FaultExpire, FaultDeleteDir}
)

type nemesis struct {
	cl      *zktest.Cluster
	w       *workload
	admin   *zk.Conn
	lockDir string // absolute
	T       time.Duration
	mean    time.Duration
	kinds   []string
	rng     *rand.Rand
	logf    func(string, ...any)

	wg         sync.WaitGroup
	mu         sync.Mutex
	faults     []Fault
	serverBusy bool
	dirBusy    bool
	clientBusy map[int]bool
	down       map[int]bool // servers whose restart failed
}

func newNemesis(cl *zktest.Cluster, w *workload, admin *zk.Conn, lockDir string, cfg Config, T time.Duration) *nemesis {
	kinds := cfg.Faults
	if kinds == nil {
		kinds = append([]string(nil), ClientFaults...)
		if err := cl.Resume(0); !errors.Is(err, zktest.ErrUnsupported) {
			kinds = append(kinds, ServerFaults...)
		}
	}
	return &nemesis{cl: cl, w: w, admin: admin, lockDir: lockDir, T: T, mean: cfg.FaultEvery, kinds: kinds,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973)), logf: cfg.Logf,
		clientBusy: map[int]bool{}, down: map[int]bool{}}
}

// between draws a duration uniformly in [lo, hi).
func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

// run injects faults until ctx ends, then waits until every fault is
// undone. All random choices are drawn here, in order, whether or not the
// fault can be injected (a busy target skips it), so the schedule of
// choices depends on the seed only.
//
// The first len(kinds) faults are a tour: every kind once, in an order drawn
// from the seed, each waiting for its target to be free instead of being
// skipped, so that a run tries every kind once its fault phase is long
// enough for the tour (a server fault waits for the previous restart).
func (n *nemesis) run(ctx context.Context) {
	tour := n.rng.Perm(len(n.kinds))
	for i := 0; ; i++ {
		wait := min(time.Duration(n.rng.ExpFloat64()*float64(n.mean)), 4*n.mean)
		kind := n.kinds[n.rng.IntN(len(n.kinds))]
		touring := i < len(tour)
		if touring {
			kind = n.kinds[tour[i]]
		}
		server := n.rng.IntN(len(n.cl.Addrs()))
		client := n.rng.IntN(len(n.w.clients))
		d := n.between(300*time.Millisecond, 2500*time.Millisecond)
		lat := n.between(10*time.Millisecond, 400*time.Millisecond)
		bh := n.between(n.T*3/10, n.T*16/10)
		pause(ctx, wait)
		if touring {
			n.awaitFree(ctx, kind, client)
		}
		if ctx.Err() != nil {
			break
		}
		switch kind {
		case FaultKillServer, FaultStopServer, FaultKillLeader, FaultPauseServer:
			n.serverFault(ctx, kind, server, d)
		case FaultCut, FaultBlackhole, FaultLatency, FaultExpire:
			if kind == FaultBlackhole {
				d = bh
			}
			n.clientFault(ctx, kind, client, d, lat)
		case FaultDeleteDir:
			n.deleteDir()
		}
	}
	n.wg.Wait()
}

// awaitFree waits until the target of a fault of kind (client ci for a
// client fault) is free, or ctx ends.
func (n *nemesis) awaitFree(ctx context.Context, kind string, ci int) {
	for ctx.Err() == nil {
		n.mu.Lock()
		var busy bool
		switch kind {
		case FaultKillServer, FaultStopServer, FaultKillLeader, FaultPauseServer:
			busy = n.serverBusy || len(n.down) > 0
		case FaultDeleteDir:
			busy = n.dirBusy
		default:
			busy = n.clientBusy[ci]
		}
		n.mu.Unlock()
		if !busy {
			return
		}
		pause(ctx, 20*time.Millisecond)
	}
}

func (n *nemesis) record(f Fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults = append(n.faults, f)
}

func (n *nemesis) snapshot() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Fault(nil), n.faults...)
}

func (n *nemesis) serverFault(ctx context.Context, kind string, i int, d time.Duration) {
	n.mu.Lock()
	if n.serverBusy || len(n.down) > 0 {
		n.mu.Unlock()
		return
	}
	n.serverBusy = true
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f := Fault{Kind: kind, Client: -1, Start: n.w.rec.now()}
		var errs []error
		var err error
		switch kind {
		case FaultKillLeader:
			if i, err = n.cl.Leader(); err == nil {
				err = n.cl.Kill(i)
			}
		case FaultKillServer:
			err = n.cl.Kill(i)
		case FaultStopServer:
			err = n.cl.Stop(i)
		case FaultPauseServer:
			err = n.cl.Pause(i)
		}
		f.Target = fmt.Sprintf("server %d", i)
		if err != nil {
			errs = append(errs, err)
		}
		if i >= 0 {
			pause(ctx, d)
			if kind == FaultPauseServer {
				err = n.cl.Resume(i)
			} else {
				err = n.cl.Restart(i)
			}
			if err != nil {
				errs = append(errs, err)
				n.mu.Lock()
				n.down[i] = true
				n.mu.Unlock()
			}
		}
		f.End = n.w.rec.now()
		if err := errors.Join(errs...); err != nil {
			f.Err = err.Error()
			n.logf("nemesis: %s %s: %v", kind, f.Target, err)
		}
		n.record(f)
		n.mu.Lock()
		n.serverBusy = false
		n.mu.Unlock()
	}()
}

func (n *nemesis) clientFault(ctx context.Context, kind string, ci int, d, lat time.Duration) {
	n.mu.Lock()
	if n.clientBusy[ci] {
		n.mu.Unlock()
		return
	}
	n.clientBusy[ci] = true
	n.mu.Unlock()
	c := n.w.clients[ci]
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f := Fault{Kind: kind, Target: fmt.Sprintf("client %d", ci), Client: ci, Start: n.w.rec.now()}
		switch kind {
		case FaultCut:
			c.proxy.Cut()
			pause(ctx, d)
			c.proxy.Resume()
		case FaultBlackhole:
			c.proxy.BlackholeFor(ctx, d)
		case FaultLatency:
			c.proxy.SetLatency(lat)
			f.Target += fmt.Sprintf(" +%v", lat.Round(time.Millisecond))
			pause(ctx, d)
			c.proxy.SetLatency(0)
		case FaultExpire:
			f.Revokes = true
			id, pw, ok := c.tap.Session()
			if !ok {
				f.Err, f.Revokes = "no session to expire", false
				break
			}
			f.Target += fmt.Sprintf(" session 0x%x", id)
			ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			zxid, err := zktest.ExpireSession(ectx, n.cl.Addrs(), id, pw)
			cancel()
			switch {
			case err == nil:
				f.Certain, f.Below = true, fence.Token(zxid)
			case errors.Is(err, zktest.ErrSessionGone):
				f.Err, f.Revokes = err.Error(), false
			default:
				f.Err = err.Error() // the close may or may not have been applied
			}
		}
		f.End = n.w.rec.now()
		n.record(f)
		n.mu.Lock()
		delete(n.clientBusy, ci)
		n.mu.Unlock()
	}()
}

func (n *nemesis) deleteDir() {
	n.mu.Lock()
	if n.dirBusy {
		n.mu.Unlock()
		return
	}
	n.dirBusy = true
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f := Fault{Kind: FaultDeleteDir, Target: n.lockDir, Client: -1, Start: n.w.rec.now(), Revokes: true}
		if err := deleteAll(n.admin, n.lockDir); err != nil {
			f.Err = err.Error()
		} else {
			f.Certain = true
			// The parent's pzxid is the zxid of the deletion, or of the
			// directory's re-creation by a participant right after it:
			// either way every node created before the deletion has a
			// smaller czxid (no node can be created while the directory
			// is missing).
			if ok, st, err := n.admin.Exists(path.Dir(n.lockDir)); err == nil && ok {
				f.Below = fence.Token(st.Pzxid)
			}
		}
		f.End = n.w.rec.now()
		n.record(f)
		n.mu.Lock()
		n.dirBusy = false
		n.mu.Unlock()
	}()
}

// heal undoes whatever is left: every proxy forwards without latency, every
// server runs (restarted if a restart failed, continued if paused), and
// every server serves.
func (n *nemesis) heal(ctx context.Context) error {
	for _, c := range n.w.clients {
		c.proxy.Resume()
		c.proxy.SetLatency(0)
	}
	n.mu.Lock()
	down := n.down
	n.down = map[int]bool{}
	n.mu.Unlock()
	var errs []error
	for i := range n.cl.Addrs() {
		if down[i] {
			if err := n.cl.Restart(i); err != nil {
				errs = append(errs, err)
			}
		} else if err := n.cl.Resume(i); err != nil && !errors.Is(err, zktest.ErrUnsupported) {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range n.cl.Addrs() {
		for {
			out, err := zktest.FourLetter(ctx, a, "srvr")
			if err == nil && (strings.Contains(out, "Mode: leader") || strings.Contains(out, "Mode: follower") || strings.Contains(out, "Mode: standalone")) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("server %s not serving after the heal: %v", a, err))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}
