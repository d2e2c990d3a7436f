package nemesis

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"go.uber.org/goleak"
)

// Config is one run's settings. Zero values take the defaults; negative
// ones make Run return ErrBadConfig.
type Config struct {
	Clients        int           // clients, each with its own connection (session) and proxy (default 4)
	Duration       time.Duration // how long the nemesis injects faults (default 10 s)
	Seed           uint64        // seeds the workload's and the nemesis's choices
	SessionTimeout time.Duration // the session timeout Run's ZooKeeper clients ask for (default 2 s); other targets have their own
	FaultEvery     time.Duration // mean wait between two faults (default 600 ms)
	// Faults lists the fault kinds to inject (nil: all the target has,
	// which for ZooKeeper leaves out server faults on a cluster that
	// cannot be controlled). Names are those of FaultNames (ZooKeeper:
	// ServerFaults and ClientFaults); anything else, or an empty non-nil
	// list, makes Run return ErrBadConfig.
	Faults []string
	// Dir is the run's base, given to Target.Prepare (default
	// "/nemesis/<recipe>"); the recipe locks Dir+"/lock". ZooKeeper: a
	// znode, the znode register is Dir+"/register", and it is deleted
	// before and after the run.
	Dir string
	// SQL, if set, adds the SQL register: each fenced write also runs
	// fencesql.Do on this database, with Dir as the resource, and writes
	// the row named Dir of table nemesis_register in its transaction. Both
	// tables are created if missing and both rows reset when the run
	// starts (a fresh ensemble's tokens start low again).
	SQL  *sql.DB
	Logf func(format string, args ...any)
}

// Result is a run's history and the report of its checks.
type Result struct {
	History *History
	Report  *Report
}

// Run runs recipe r against cl under the nemesis: RunTarget on
// ZooKeeper's target (ZooKeeperTarget, whose clients ask for
// cfg.SessionTimeout), closed after the run. See RunTarget and
// ZooKeeperTarget for the checks.
func Run(ctx context.Context, cl *zktest.Cluster, r Recipe, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := newZKTarget(cl, cfg.withDefaults(r).SessionTimeout)
	defer t.Close()
	return RunTarget(ctx, t, r, cfg)
}

func runTarget(ctx context.Context, t Target, r Recipe, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(r)
	if err := t.Prepare(ctx, cfg.Dir); err != nil {
		return nil, err
	}
	kinds, err := chooseKinds(t, cfg.Faults)
	if err != nil {
		return nil, err
	}
	leakOpts := []goleak.Option{goleak.IgnoreCurrent()}
	if lf, ok := t.(LeakFilter); ok {
		leakOpts = append(leakOpts, lf.IgnoreLeaks()...)
	}
	w := &workload{cfg: cfg, r: r, rec: newRecorder(), regs: t.Registers()}
	if cfg.SQL != nil {
		if w.sql, err = newSQLRegister(ctx, cfg.SQL, cfg.Dir); err != nil {
			return nil, err
		}
	}
	if err := w.connectAll(ctx, t, cfg.Dir+"/lock"); err != nil {
		return nil, err
	}
	T := t.SessionTimeout()
	h := &History{Format: HistoryFormat, Backend: t.Name(), Recipe: r.Name, Seed: cfg.Seed, Clients: cfg.Clients, SessionTimeout: T}

	// The workload, the nemesis, then the heal.
	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	clientsDone := w.start(wctx)
	n := newNemesis(w, append(kinds.generic(w, T), kinds.own...), cfg, T)
	faultAndHeal(ctx, t, n, h, cfg)

	// Stop and close every client.
	stopWork()
	w.stop(clientsDone)
	h.End = w.rec.now()
	time.Sleep(50 * time.Millisecond) // let the last context.AfterFunc callbacks record their ends
	h.Grants, h.Ops = w.rec.snapshot()
	h.Faults = n.snapshot()
	h.FirstGrantAfterHeal = w.rec.firstGrantAfter(h.Healed)

	rep := Check(h, r.Allowed)
	checkLeftovers(ctx, t, rep)
	if re, ok := t.(RunEnder); ok {
		if err := re.EndRun(ctx); err != nil {
			rep.violate("%s: ending the run: %v", t.Name(), err)
		}
	}
	if err := goleak.Find(leakOpts...); err != nil {
		rep.violate("goroutines left after the run: %v", err)
	}
	if ctx.Err() != nil {
		// Cut short: the heal, the recovery and the leak checks did not run
		// to completion, so the report would blame the interruption.
		return &Result{History: h, Report: rep}, fmt.Errorf("nemesis: run interrupted: %w", context.Cause(ctx))
	}
	return &Result{History: h, Report: rep}, nil
}

// kindChoice is the fault kinds of a run: the generic ones by name (made
// once the clients exist) and t's own.
type kindChoice struct {
	generic func(w *workload, T time.Duration) []FaultKind
	own     []FaultKind
}

// chooseKinds keeps the kinds named in names (nil: every kind), in the
// order of FaultNames; a name that is neither generic nor t's is
// ErrBadConfig.
func chooseKinds(t Target, names []string) (kindChoice, error) {
	known := FaultNames(t)
	for _, k := range names {
		if !slices.Contains(known, k) {
			return kindChoice{}, fmt.Errorf("%w: unknown fault kind %q (known on %s: %s)", ErrBadConfig, k, t.Name(), strings.Join(known, ", "))
		}
	}
	want := func(k string) bool { return names == nil || slices.Contains(names, k) }
	var c kindChoice
	for _, k := range t.Faults() {
		if want(k.Name) {
			c.own = append(c.own, k)
		}
	}
	c.generic = func(w *workload, T time.Duration) []FaultKind {
		return slices.DeleteFunc(w.genericFaults(T), func(k FaultKind) bool { return !want(k.Name) })
	}
	return c, nil
}

// faultAndHeal runs the nemesis for cfg.Duration, heals every fault, and
// waits up to T+3 s for a grant after the heal (recorded in h.Healed); if
// none comes, it records in h.Diagnosis what the servers hold while the
// clients still wait.
func faultAndHeal(ctx context.Context, t Target, n *nemesis, h *History, cfg Config) {
	nctx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	n.run(nctx)
	stopFaults()
	n.w.heal()
	if err := t.Heal(ctx); err != nil {
		cfg.Logf("nemesis: heal: %v", err)
	}
	rec := n.w.rec
	h.Healed = rec.now()
	deadline := time.Now().Add(n.T + 3*time.Second)
	for time.Now().Before(deadline) && rec.firstGrantAfter(h.Healed) < 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if rec.firstGrantAfter(h.Healed) < 0 && ctx.Err() == nil {
		// Stuck: look at the servers while the clients still wait.
		h.Diagnosis = t.Diagnose(ctx)
		for _, l := range h.Diagnosis {
			cfg.Logf("no grant after the heal: %s", l)
		}
	}
}

// checkLeftovers reports in rep what t says the run left behind once
// every client closed, asking again for up to 10 s (for the cleaners).
func checkLeftovers(ctx context.Context, t Target, rep *Report) {
	var left []string
	var err error
	for end := time.Now().Add(10 * time.Second); ; {
		left, err = t.Leftovers(ctx)
		if (err == nil && len(left) == 0) || time.Now().After(end) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		rep.violate("%s: checking what the run left: %v", t.Name(), err)
	}
	for _, l := range left {
		rep.violate("%s: left after every client closed: %s", t.Name(), l)
	}
}

// ErrBadConfig is matched (errors.Is) by the error Run returns for a Config
// it cannot carry out: a negative count or duration, an empty, non-nil
// fault list, or (RunTarget) a fault kind the target does not know.
var ErrBadConfig = errors.New("nemesis: bad config")

// Validate reports (ErrBadConfig) what Run would refuse without looking at
// the target (the fault kinds' names are checked against it by RunTarget:
// FaultNames); Run calls it first.
func (c Config) Validate() error {
	switch {
	case c.Clients < 0:
		return fmt.Errorf("%w: %d clients", ErrBadConfig, c.Clients)
	case c.Duration < 0, c.SessionTimeout < 0, c.FaultEvery < 0:
		return fmt.Errorf("%w: negative duration (Duration %v, SessionTimeout %v, FaultEvery %v)", ErrBadConfig, c.Duration, c.SessionTimeout, c.FaultEvery)
	case c.Faults != nil && len(c.Faults) == 0:
		return fmt.Errorf("%w: an empty fault list (nil means every kind)", ErrBadConfig)
	}
	return nil
}

func (c Config) withDefaults(r Recipe) Config {
	if c.Clients <= 0 {
		c.Clients = 4
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 2 * time.Second
	}
	if c.FaultEvery <= 0 {
		c.FaultEvery = 600 * time.Millisecond
	}
	if c.Dir == "" {
		c.Dir = "/nemesis/" + r.Name
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
