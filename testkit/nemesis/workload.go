package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// client is one client of the workload: its connection to the target,
// behind its own proxy, its participant, its draws, and the end of a
// pause-client fault that freezes its holds.
type client struct {
	id    int
	c     Client
	proxy *serverkit.FaultProxy
	p     Participant
	rng   *rand.Rand

	mu     sync.Mutex
	frozen time.Time // a pause-client fault stalls its holds until then
}

// workload is the clients and what they do with their grants.
type workload struct {
	cfg     Config
	r       Recipe
	rec     *recorder
	ctx     context.Context
	clients []*client
	regs    []Register   // the target's registers
	sql     *sqlRegister // nil without Config.SQL

	guard  fence.Guard
	gstate State // the guard register; only touched inside guard.Do
	gseq   int64
}

func (w *workload) connect(ctx context.Context, t Target, i int, dir string) (*client, error) {
	c := &client{id: i, proxy: serverkit.NewFaultProxy(), rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+1))}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if c.c, err = t.Connect(cctx, i, c.proxy); err != nil {
		c.proxy.Close()
		return nil, fmt.Errorf("nemesis: client %d: %w", i, err)
	}
	if c.p, err = w.r.Open(c.c, dir); err != nil {
		c.c.Close()
		c.proxy.Close()
		return nil, fmt.Errorf("nemesis: client %d: %w", i, err)
	}
	return c, nil
}

// connectAll connects cfg.Clients clients, each behind its own proxy, with
// a participant over dir; after a failure it closes those it connected.
func (w *workload) connectAll(ctx context.Context, t Target, dir string) error {
	for i := range w.cfg.Clients {
		c, err := w.connect(ctx, t, i, dir)
		if err != nil {
			w.closeClients()
			return err
		}
		w.clients = append(w.clients, c)
	}
	return nil
}

// start runs every client's participant until ctx ends; the returned
// group is done when every participant has returned.
func (w *workload) start(ctx context.Context) *sync.WaitGroup {
	w.ctx = ctx
	var clientsDone sync.WaitGroup
	for _, c := range w.clients {
		clientsDone.Add(1)
		go func() {
			defer clientsDone.Done()
			_ = c.p.Run(ctx, c.rng, func(hd Held) { w.hold(c, hd) }, func(asked time.Time, err error) { w.rec.failed(c.id, asked, err) })
		}()
	}
	return &clientsDone
}

// stop, once the participants' context has ended, waits up to 20 s for
// them to return, closes every client, and waits for the rest.
func (w *workload) stop(clientsDone *sync.WaitGroup) {
	waitTimeout(clientsDone, 20*time.Second)
	w.closeClients()
	clientsDone.Wait()
}

func (w *workload) closeClients() {
	for _, c := range w.clients {
		c.thaw()
		c.proxy.Resume()
		c.proxy.SetLatency(0)
		c.c.Close()
		c.proxy.Close()
	}
}

// hold is what a client does with a grant: one to three writes to each
// register (if the role writes), a probe, and the end. It never looks at
// the lease's context before writing: a holder that lost its lease without
// knowing it writes anyway, and the registers must refuse it. A
// pause-client fault stalls it before a write; a holder frozen after its
// last write writes once more when it thaws.
func (w *workload) hold(c *client, hd Held) {
	g := w.rec.grant(c.id, hd)
	n := 1 + c.rng.IntN(3)
	for i := 0; i < n; i++ {
		pause(w.ctx, time.Duration(c.rng.IntN(15))*time.Millisecond)
		w.freeze(c)
		if w.ctx.Err() != nil {
			break
		}
		if w.r.Fenced(hd.Role) {
			w.writeAll(c, g, fmt.Sprintf("c%d-g%d-%d", c.id, g.ID, i))
		}
		if i == n-1 && c.isFrozen() {
			n++
		}
	}
	w.rec.probe(c.id, g)
	pause(w.ctx, time.Duration(c.rng.IntN(10))*time.Millisecond)
	w.rec.giveUp(g)
}

// writeAll writes val to every register: the guard, the target's, SQL's.
func (w *workload) writeAll(c *client, g *Grant, val string) {
	w.writeGuard(c, g, val)
	for _, reg := range w.regs {
		w.writeTarget(c, g, reg, val)
	}
	if w.sql != nil {
		w.writeSQL(c, g, val)
	}
}

// freezeFor freezes c's holds for d (a pause-client fault).
func (c *client) freezeFor(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = time.Now().Add(d)
}

// thaw ends a freeze early.
func (c *client) thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = time.Time{}
}

func (c *client) isFrozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Before(c.frozen)
}

// freeze waits while c is frozen (or until the workload stops), without
// looking at any lease's context: a paused process does not run.
func (w *workload) freeze(c *client) {
	for c.isFrozen() && w.ctx.Err() == nil {
		pause(w.ctx, 10*time.Millisecond)
	}
}
