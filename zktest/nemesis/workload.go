package nemesis

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/fence/fencezk"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// client is one client of the workload: its session, behind its own proxy
// and tap, its participant, its handle on the znode register, its draws.
type client struct {
	id    int
	s     *zookeeper.Session
	proxy *zktest.FaultProxy
	tap   *zktest.SessionTap
	p     Participant
	reg   *fencezk.Register
	rng   *rand.Rand
}

// workload is the clients and what they do with their grants.
type workload struct {
	cfg     Config
	r       Recipe
	rec     *recorder
	ctx     context.Context
	clients []*client
	regPath string
	sql     *sqlRegister // nil without Config.SQL

	guard  fence.Guard
	gstate State // the guard register; only touched inside guard.Do
	gseq   int64
}

func (w *workload) connect(ctx context.Context, cl *zktest.Cluster, i int, dir string) (*client, error) {
	c := &client{id: i, proxy: zktest.NewFaultProxy(), tap: zktest.NewSessionTap(),
		rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+1))}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The nemesis suspends and cuts sessions all the time: their warnings
	// (which a Session sends to slog.Default() by default) say nothing
	// the history does not.
	s, err := zookeeper.Connect(cctx, cl.Servers(), zookeeper.WithDialer(c.tap.Dialer(c.proxy.Dial)),
		zookeeper.WithSessionTimeout(w.cfg.SessionTimeout), zookeeper.WithConnectTimeout(30*time.Second),
		zookeeper.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		c.proxy.Close()
		return nil, fmt.Errorf("nemesis: client %d: %w", i, err)
	}
	c.s = s
	if c.reg, err = fencezk.New(s, w.regPath); err != nil {
		s.Close()
		c.proxy.Close()
		return nil, fmt.Errorf("nemesis: client %d: %w", i, err)
	}
	if c.p, err = w.r.Open(s, dir); err != nil {
		s.Close()
		c.proxy.Close()
		return nil, fmt.Errorf("nemesis: client %d: %w", i, err)
	}
	return c, nil
}

// connectAll connects cfg.Clients clients, each on its own session behind
// its own proxy, with a participant over dir; after a failure it closes
// those it connected.
func (w *workload) connectAll(ctx context.Context, cl *zktest.Cluster, dir string) error {
	for i := range w.cfg.Clients {
		c, err := w.connect(ctx, cl, i, dir)
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
		c.proxy.Resume()
		c.proxy.SetLatency(0)
		c.s.Close()
		c.proxy.Close()
	}
}

// hold is what a client does with a grant: one to three writes to each
// register (if the role writes), a probe, and the end. It never looks at
// the lease's context before writing: a holder that lost its lease without
// knowing it writes anyway, and the registers must refuse it.
func (w *workload) hold(c *client, hd Held) {
	g := w.rec.grant(c.id, hd)
	for i := range 1 + c.rng.IntN(3) {
		pause(w.ctx, time.Duration(c.rng.IntN(15))*time.Millisecond)
		if w.ctx.Err() != nil {
			break
		}
		if w.r.Fenced(hd.Role) {
			val := fmt.Sprintf("c%d-g%d-%d", c.id, g.ID, i)
			w.writeGuard(c, g, val)
			w.writeZnode(c, g, val)
			if w.sql != nil {
				w.writeSQL(c, g, val)
			}
		}
	}
	w.rec.probe(c.id, g)
	pause(w.ctx, time.Duration(c.rng.IntN(10))*time.Millisecond)
	w.rec.giveUp(g)
}
