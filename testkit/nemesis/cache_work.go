package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/cache"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// cacheRecorder records a caches run, with times since the start of the
// run (the engine recorder's start, so that faults line up).
type cacheRecorder struct {
	start  time.Time
	chroot string
	parts  []*cacheParticipant

	mu        sync.Mutex
	ops       []CacheOp
	events    []CacheEventRec
	snaps     []CacheSnap
	snapErrs  int
	cacheErrs []string
	listens   sync.WaitGroup // the listeners, until their channel closes
	writers   sync.WaitGroup // the writers, until they stop at the heal
}

func (r *cacheRecorder) now() time.Duration { return time.Since(r.start) }

func (r *cacheRecorder) op(ops ...CacheOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, ops...)
}

func nodeRec(n recipe.Node) CacheNode {
	return CacheNode{Path: n.Path, Data: string(n.Data), Created: n.Created, Modified: n.Modified}
}

// snap records a Snapshot of cache c (or its failure) and returns it.
func (r *cacheRecorder) snap(ctx context.Context, c int, ca *cache.Cache) (CacheSnap, bool) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	s, err := ca.Snapshot(sctx)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.snapErrs++
		return CacheSnap{}, false
	}
	cs := CacheSnap{Cache: c, At: r.now(), Rev: s.Rev, Nodes: make([]CacheNode, 0, len(s.Nodes))}
	for _, n := range s.Nodes {
		cs.Nodes = append(cs.Nodes, nodeRec(n))
	}
	r.snaps = append(r.snaps, cs)
	return cs, true
}

// listen records every event of a new listener of cache c until its
// channel closes (the cache's Close).
func (r *cacheRecorder) listen(c, l int, ca *cache.Cache) {
	ch := ca.Listen(context.Background())
	r.listens.Add(1)
	go func() {
		defer r.listens.Done()
		for e := range ch {
			rec := CacheEventRec{Cache: c, Listener: l, Kind: e.Kind.String(), Rev: e.Rev, Node: nodeRec(e.Node)}
			r.mu.Lock()
			rec.At = r.now()
			r.events = append(r.events, rec)
			r.mu.Unlock()
		}
	}()
}

func (r *cacheRecorder) snapshot() ([]CacheOp, []CacheEventRec, []CacheSnap, int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops), slices.Clone(r.events), slices.Clone(r.snaps), r.snapErrs, slices.Clone(r.cacheErrs)
}

// setup creates root (the run's setup, writer -1) and each client's top
// node root/w<i> on its own session, recording both as applied creates
// (their czxid read right after: nothing else writes them yet), then binds
// each participant: its writer, and its cache with its first listener.
func (r *cacheRecorder) setup(w *workload, root string, quiet <-chan struct{}) error {
	conn := w.clients[0].c.(*zkClient).s.Conn()
	if err := r.created(conn, -1, root, "root"); err != nil {
		return err
	}
	for _, c := range w.clients {
		p := c.p.(*cacheParticipant)
		wr := &cacheWriter{id: c.id, conn: p.zc.s.Conn(), rec: r, top: fmt.Sprintf("%s/w%d", root, c.id)}
		if err := r.created(wr.conn, c.id, wr.top, wr.value()); err != nil {
			return err
		}
		var opts []cache.Option
		if c.id == w.cfg.Clients-1 {
			opts = append(opts, cache.WithOneShotWatches())
		}
		ca, err := cache.New(p.zc.s, root, opts...)
		if err != nil {
			return err
		}
		p.w, p.c, p.rec, p.quiet, p.wr, p.cache = w, c, r, quiet, wr, ca
		r.parts = append(r.parts, p)
		r.writers.Add(1)
		r.listen(c.id, 0, ca)
	}
	return nil
}

// created creates p with data v and records it as writer's applied create.
func (r *cacheRecorder) created(conn *zk.Conn, writer int, p, v string) error {
	call := r.now()
	if _, err := conn.Create(r.chroot+p, []byte(v), 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("nemesis: creating %s: %w", p, err)
	}
	ok, st, err := conn.Exists(r.chroot + p)
	if err != nil || !ok {
		return fmt.Errorf("nemesis: reading %s after creating it: %v", p, err)
	}
	r.op(CacheOp{Writer: writer, Kind: CacheCreate, Path: p, Value: v, Call: call, Return: r.now(), Outcome: CacheApplied,
		Zxid: st.Czxid, Created: st.Czxid})
	return nil
}

// converge takes a Snapshot of each cache every 100 ms until it equals
// final (any if !ok), or deadline (since the start of the run) has passed;
// it returns each cache's last one (At -1 if none).
func (r *cacheRecorder) converge(ctx context.Context, w *workload, final CacheSnap, ok bool, deadline time.Duration) []CacheSnap {
	last := make([]CacheSnap, len(r.parts))
	done := make([]bool, len(r.parts))
	for i := range last {
		last[i] = CacheSnap{Cache: r.parts[i].c.id, At: -1}
	}
	for ctx.Err() == nil {
		all := true
		for i, p := range r.parts {
			if done[i] {
				continue
			}
			if s, got := r.snap(ctx, p.c.id, p.cache); got {
				last[i] = s
				done[i] = ok && slices.Equal(s.Nodes, final.Nodes)
			}
			all = all && done[i]
		}
		if all || r.now() > deadline {
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
	return last
}

// cacheParticipant is one client of a caches run: a writer of its own
// subtree and a cache of the root, on the client's session.
type cacheParticipant struct {
	zc    *zkClient
	w     *workload
	c     *client
	rec   *cacheRecorder
	quiet <-chan struct{} // closed at the heal: the writer stops
	wr    *cacheWriter
	cache *cache.Cache
}

// Run is the Participant's: snapshots and a second listener (from a random
// point of the fault phase) on goroutines of their own, the writer until
// the heal; then, once ctx ends, the cache's Close.
func (p *cacheParticipant) Run(ctx context.Context, rng *rand.Rand, _ func(Held), _ func(time.Time, error)) error {
	if p.rec == nil {
		return fmt.Errorf("%w: the caches recipe runs with RunCache, not RunTarget", ErrBadConfig)
	}
	var wg sync.WaitGroup
	srng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	late := time.Duration(rng.Int64N(int64(p.w.cfg.Duration)))
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.snapshots(ctx, srng, late)
	}()
	p.write(ctx, rng)
	p.rec.writers.Done()
	<-ctx.Done()
	wg.Wait()
	if err := p.cache.Err(); err != nil {
		p.rec.mu.Lock()
		p.rec.cacheErrs = append(p.rec.cacheErrs, fmt.Sprintf("cache %d stopped: %v", p.c.id, err))
		p.rec.mu.Unlock()
	}
	return p.cache.Close()
}

// snapshots takes a Snapshot every 100 to 300 ms until the heal, and
// starts the cache's second listener after late.
func (p *cacheParticipant) snapshots(ctx context.Context, rng *rand.Rand, late time.Duration) {
	start := time.Now()
	listening := false
	for ctx.Err() == nil {
		select {
		case <-p.quiet:
			return
		default:
		}
		if !listening && time.Since(start) >= late {
			p.rec.listen(p.c.id, 1, p.cache)
			listening = true
		}
		p.rec.snap(ctx, p.c.id, p.cache)
		pause(ctx, 100*time.Millisecond+time.Duration(rng.IntN(200))*time.Millisecond)
	}
}

// write runs the writer every 5 to 40 ms until the heal (or ctx ends),
// stalled by a pause-client fault like a holder.
func (p *cacheParticipant) write(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		select {
		case <-p.quiet:
			return
		default:
		}
		pause(ctx, 5*time.Millisecond+time.Duration(rng.IntN(35))*time.Millisecond)
		p.w.freeze(p.c)
		if ctx.Err() != nil {
			return
		}
		if !p.wr.synced {
			p.wr.sync()
			continue
		}
		p.wr.step(rng)
	}
}

// cacheNodes are a writer's nodes below its top node, parents first.
var cacheNodes = []string{"a", "b", "d0", "d0/a", "d0/b", "d0/e", "d0/e/a", "d1", "d1/a"}

// cacheWriter writes a client's subtree top, one op at a time, through the
// client's go-zookeeper connection (so that each op's Stat gives its zxid).
type cacheWriter struct {
	id      int
	conn    *zk.Conn
	rec     *cacheRecorder
	top     string
	seq     int
	present map[string]bool // what the writer believes of its nodes (by name)
	synced  bool            // present was read since the last op not applied
}

// value returns the writer's next data value: unique in the run.
func (w *cacheWriter) value() string {
	v := fmt.Sprintf("w%d-%d", w.id, w.seq)
	w.seq++
	return v
}

func (w *cacheWriter) abs(name string) string { return w.rec.chroot + w.top + "/" + name }

// sync reads which of its nodes exist (after an op not applied, whose
// outcome the writer does not know, or which showed its belief wrong).
func (w *cacheWriter) sync() {
	present := map[string]bool{}
	for _, n := range cacheNodes {
		ok, _, err := w.conn.Exists(w.abs(n))
		if err != nil {
			return
		}
		present[n] = ok
	}
	w.present, w.synced = present, true
}

// step makes one op on a random node: a create if absent (of its highest
// missing ancestor first), else a set (6 times in 10, or while it has
// children) or a delete.
func (w *cacheWriter) step(rng *rand.Rand) {
	n := cacheNodes[rng.IntN(len(cacheNodes))]
	if !w.present[n] {
		for d := path.Dir(n); d != "." && !w.present[d]; d = path.Dir(d) {
			n = d
		}
		w.multi(CacheCreate, n, &zk.CreateRequest{Path: w.abs(n), Acl: zk.WorldACL(zk.PermAll)})
		return
	}
	if rng.IntN(10) < 6 || slices.ContainsFunc(cacheNodes, func(c string) bool { return path.Dir(c) == n && w.present[c] }) {
		v := w.value()
		op := CacheOp{Writer: w.id, Kind: CacheSet, Path: w.top + "/" + n, Value: v, Call: w.rec.now()}
		st, err := w.conn.Set(w.abs(n), []byte(v), -1)
		w.finish(err, st, &op)
		return
	}
	w.multi(CacheDelete, n, &zk.DeleteRequest{Path: w.abs(n), Version: -1})
}

// multi creates or deletes node n in a Multi with a set of the top node,
// whose Stat gives the zxid of both.
func (w *cacheWriter) multi(kind, n string, req any) {
	op := CacheOp{Writer: w.id, Kind: kind, Path: w.top + "/" + n}
	if cr, ok := req.(*zk.CreateRequest); ok {
		op.Value = w.value()
		cr.Data = []byte(op.Value)
	}
	stamp := CacheOp{Writer: w.id, Kind: CacheSet, Path: w.top, Value: w.value()}
	op.Call = w.rec.now()
	stamp.Call = op.Call
	res, err := w.conn.Multi(req, &zk.SetDataRequest{Path: w.rec.chroot + w.top, Data: []byte(stamp.Value), Version: -1})
	var st *zk.Stat
	if err == nil && len(res) == 2 && res[1].Stat != nil {
		st = res[1].Stat
	} else if err == nil {
		err = fmt.Errorf("multi: no Stat in %d responses", len(res))
	}
	w.finish(err, st, &op, &stamp)
	if op.Outcome == CacheApplied {
		w.present[n] = kind == CacheCreate
	}
}

// finish records ops, answered by err and st (their outcome, and the
// zxid of an applied one).
func (w *cacheWriter) finish(err error, st *zk.Stat, ops ...*CacheOp) {
	ret := w.rec.now()
	outcome := CacheMaybe
	switch {
	case err == nil:
		outcome = CacheApplied
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrBadVersion):
		outcome = CacheFailed
	}
	if outcome != CacheApplied {
		w.synced = false
	}
	var out []CacheOp
	for _, o := range ops {
		o.Return, o.Outcome = ret, outcome
		if err != nil {
			o.Err = err.Error()
		} else {
			o.Zxid, o.Created = st.Mzxid, st.Czxid
			if o.Kind == CacheCreate {
				o.Created = st.Mzxid
			} else if o.Kind == CacheDelete {
				o.Created = 0
			}
		}
		out = append(out, *o)
	}
	w.rec.op(out...)
}
