package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"go.uber.org/goleak"
)

// CacheFormat names the JSON layout of a CacheHistory.
const CacheFormat = "zkrecipes-nemesis-caches/1"

// Kinds of CacheOp.
const (
	CacheCreate = "create"
	CacheSet    = "set"
	CacheDelete = "delete"
)

// Outcomes of a CacheOp.
const (
	// CacheApplied: the server answered OK; Zxid is exact.
	CacheApplied = "applied"
	// CacheFailed: the server refused it (no node, node exists, not
	// empty): not applied.
	CacheFailed = "failed"
	// CacheMaybe: the answer was lost (connection lost, session expired,
	// client closed): applied or not.
	CacheMaybe = "maybe"
)

// CacheOp is one write of a caches run. A create or delete is a Multi of
// the op and a set of the writer's top node (its own directory below the
// root), whose Stat gives the zxid of both; so each create or delete is
// recorded with that set, same times, same outcome. Times are since the
// start of the run.
type CacheOp struct {
	Writer int    // the client that wrote; -1 for the run's setup (the root)
	Kind   string // CacheCreate, CacheSet, CacheDelete
	Path   string // below the chroot, as the caches report it
	Value  string `json:",omitempty"` // the data written (create, set): unique in the run
	Call   time.Duration
	Return time.Duration
	// Outcome is CacheApplied, CacheFailed or CacheMaybe.
	Outcome string
	// Zxid (applied only) is the zxid the op took effect at; Created the
	// node's czxid after it (create: Zxid; set: the Stat's Czxid).
	Zxid    int64  `json:",omitempty"`
	Created int64  `json:",omitempty"`
	Err     string `json:",omitempty"`
}

// CacheNode is one node as a cache or the final read showed it.
type CacheNode struct {
	Path, Data        string
	Created, Modified int64
}

// CacheEventRec is one event a listener got.
type CacheEventRec struct {
	Cache    int // the client whose cache it is
	Listener int // 0: listening from the cache's start; 1: from a random point of the run
	At       time.Duration
	Kind     string // recipe.EventKind's String
	Rev      int64
	Node     CacheNode
}

// CacheSnap is one Snapshot of a cache, or the final read (Cache -1, Rev
// 0: read node by node once the writers stopped, unchanged over two
// reads).
type CacheSnap struct {
	Cache int
	At    time.Duration
	Rev   int64
	Nodes []CacheNode
}

// CacheHistory is everything a caches run recorded.
type CacheHistory struct {
	Format         string
	Backend        string
	Seed           uint64
	Clients        int
	OneShot        int // the client whose cache follows with one-shot watches
	SessionTimeout time.Duration
	Root           string // the root every cache holds (tree mode)
	Ops            []CacheOp
	Events         []CacheEventRec
	Snaps          []CacheSnap // the caches' Snapshots, those of the convergence phase included
	SnapErrs       int         // Snapshot calls that failed or timed out (1 s)
	CacheErrs      []string    // caches that stopped following (Err) before the end of the run
	Faults         []Fault
	// Healed is when every fault was undone; the writers stopped then.
	Healed time.Duration
	// Final is the server's tree once the writers stopped; FinalErr says
	// why there is none.
	Final    CacheSnap
	FinalErr string `json:",omitempty"`
	// Last[i] is cache i's last Snapshot of the convergence phase (At -1
	// if none): the first equal to Final, or the last before the bound.
	Last []CacheSnap
	End  time.Duration
}

// WriteJSON writes h as indented JSON, with Format set to CacheFormat.
func (h *CacheHistory) WriteJSON(w io.Writer) error {
	c := *h
	c.Format = CacheFormat
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&c)
}

// CacheResult is a caches run's history and the report of its checks.
type CacheResult struct {
	History *CacheHistory
	Report  *CacheReport
}

// Caches is the Recipe of a caches run, for RunCache: its Open makes each
// client's participant (a writer and a cache.Cache of the root on the
// client's session), which RunCache binds to the run's recorder once every
// client is connected. ZooKeeper's target only; RunTarget cannot run it.
func Caches() Recipe {
	return Recipe{Name: "caches", Allowed: func([]Role) bool { return true }, Fenced: func(Role) bool { return false },
		Open: func(c Client, _ string) (Participant, error) {
			if _, err := zkSession(c); err != nil {
				return nil, err
			}
			return &cacheParticipant{zc: c.(*zkClient)}, nil
		}}
}

// RunCache runs caches on t (ZooKeeper's target) under the nemesis for
// cfg.Duration with the engine's clients, proxies and faults: client i
// creates, sets and deletes the nodes of its own subtree cfg.Dir+"/cache/w<i>"
// (each node has one writer) and follows the whole of cfg.Dir+"/cache" with
// a cache.Cache on its own session (the last client's with one-shot
// watches), two listeners each, taking a Snapshot every 100 to 300 ms.
// After the heal the writers stop, a fresh client reads the tree, and every
// cache must show it within ConvergeBound(T). Then CheckCache, t's
// Leftovers and goleak check the run. cfg.Dir+"/lock" is not used: the
// delete-dir fault touches nothing of this run. The error is for a run
// that could not be carried out; t stays open.
func RunCache(ctx context.Context, t Target, cfg Config) (*CacheResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	zt, ok := t.(*zkTarget)
	if !ok {
		return nil, fmt.Errorf("%w: caches run on ZooKeeper's target only, not %s", ErrBadConfig, t.Name())
	}
	r := Caches()
	cfg = cfg.withDefaults(r)
	if err := t.Prepare(ctx, cfg.Dir); err != nil {
		return nil, err
	}
	kinds, err := chooseKinds(t, cfg.Faults)
	if err != nil {
		return nil, err
	}
	leakOpts := append([]goleak.Option{goleak.IgnoreCurrent()}, zt.IgnoreLeaks()...)
	w := &workload{cfg: cfg, r: r, rec: newRecorder()}
	if err := w.connectAll(ctx, t, cfg.Dir+"/lock"); err != nil {
		return nil, err
	}
	T := t.SessionTimeout()
	h := &CacheHistory{Format: CacheFormat, Backend: t.Name(), Seed: cfg.Seed, Clients: cfg.Clients, OneShot: cfg.Clients - 1,
		SessionTimeout: T, Root: cfg.Dir + "/cache"}
	cr := &cacheRecorder{start: w.rec.start, chroot: zt.cl.Chroot()}
	quiet := make(chan struct{})
	if err := cr.setup(w, h.Root, quiet); err != nil {
		w.closeClients()
		return nil, err
	}

	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	clientsDone := w.start(wctx)
	n := newNemesis(w, append(kinds.generic(w, T), kinds.own...), cfg, T)
	nctx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	n.run(nctx)
	stopFaults()
	close(quiet)
	w.heal()
	if err := t.Heal(ctx); err != nil {
		cfg.Logf("nemesis: heal: %v", err)
	}
	h.Healed = cr.now()
	waitTimeout(&cr.writers, 20*time.Second)
	h.Final, h.FinalErr = finalTree(ctx, t, cfg, cr, h.Root)
	h.Last = cr.converge(ctx, w, h.Final, h.FinalErr == "", h.Healed+ConvergeBound(T))

	stopWork()
	w.stop(clientsDone)
	cr.listens.Wait()
	h.End = cr.now()
	h.Ops, h.Events, h.Snaps, h.SnapErrs, h.CacheErrs = cr.snapshot()
	h.Faults = n.snapshot()

	rep := CheckCache(h)
	lr := &Report{}
	checkLeftovers(ctx, t, lr)
	if err := zt.EndRun(ctx); err != nil {
		lr.violate("%s: ending the run: %v", t.Name(), err)
	}
	if err := goleak.Find(leakOpts...); err != nil {
		lr.violate("goroutines left after the run: %v", err)
	}
	for _, v := range lr.Violations {
		rep.violateAt(nowhere, "%s", v)
	}
	res := &CacheResult{History: h, Report: rep}
	if ctx.Err() != nil {
		return res, fmt.Errorf("nemesis: run interrupted: %w", context.Cause(ctx))
	}
	return res, nil
}

// finalTree connects a fresh client (index cfg.Clients, behind a proxy of
// its own that no fault touches) and reads the tree under root every
// 200 ms until two reads in a row are equal (up to 30 s).
func finalTree(ctx context.Context, t Target, cfg Config, cr *cacheRecorder, root string) (CacheSnap, string) {
	p := serverkit.NewFaultProxy()
	defer p.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := t.Connect(cctx, cfg.Clients, p)
	cancel()
	if err != nil {
		return CacheSnap{Cache: -1}, "connecting the fresh client: " + err.Error()
	}
	defer c.Close()
	conn := c.(*zkClient).s.Conn()
	var prev []CacheNode
	why := "no read"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; pause(ctx, 200*time.Millisecond) {
		nodes, err := readTree(conn, cr.chroot, root)
		if err != nil {
			why = "reading the tree: " + err.Error()
			continue
		}
		if prev != nil && slices.Equal(prev, nodes) {
			return CacheSnap{Cache: -1, At: cr.now(), Nodes: nodes}, ""
		}
		prev, why = nodes, "the tree kept changing"
	}
	return CacheSnap{Cache: -1, At: cr.now(), Nodes: prev}, why
}

// readTree reads root and every node below it, sorted by path (chroot
// removed).
func readTree(conn *zk.Conn, chroot, root string) ([]CacheNode, error) {
	var out []CacheNode
	var walk func(p string) error
	walk = func(p string) error {
		data, st, err := conn.Get(chroot + p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, CacheNode{Path: p, Data: string(data), Created: st.Czxid, Modified: st.Mzxid})
		children, _, err := conn.Children(chroot + p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		for _, ch := range children {
			if err := walk(path.Join(p, ch)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b CacheNode) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// showNodes lists nodes briefly, for a violation.
func showNodes(ns []CacheNode) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprintf("%s=%s@%d/%d", n.Path, n.Data, n.Created, n.Modified))
	}
	if len(parts) > 12 {
		parts = append(parts[:12], fmt.Sprintf("... %d more", len(parts)-12))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Summary is one line of figures.
func (r *CacheReport) Summary() string {
	var fs []string
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		fs = append(fs, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	if len(fs) == 0 {
		fs = []string{"none"}
	}
	failed := 0
	for _, n := range r.FaultsFailed {
		failed += n
	}
	conv := "never"
	if r.Convergence >= 0 {
		conv = r.Convergence.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("writes %d applied, %d failed, %d maybe; events %d (%d listeners); snapshots %d (%d failed); faults %s (%d failed); convergence %s (bound %v); violations %d",
		r.Ops[CacheApplied], r.Ops[CacheFailed], r.Ops[CacheMaybe], r.Events, r.Listeners, r.Snaps, r.SnapErrs,
		strings.Join(fs, " "), failed, conv, r.Converge, len(r.Violations))
}
