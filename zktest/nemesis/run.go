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

	"github.com/zkrecipes/zkrecipes/zktest"
	"go.uber.org/goleak"
)

// Config is one run's settings. Zero values take the defaults; negative
// ones make Run return ErrBadConfig.
type Config struct {
	Clients        int           // clients, each with its own session and proxy (default 4)
	Duration       time.Duration // how long the nemesis injects faults (default 10 s)
	Seed           uint64        // seeds the workload's and the nemesis's choices
	SessionTimeout time.Duration // requested session timeout (default 2 s)
	FaultEvery     time.Duration // mean wait between two faults (default 600 ms)
	// Faults lists the fault kinds to inject (nil: all, except server
	// faults on a cluster that cannot be controlled). Names are those of
	// ServerFaults and ClientFaults; anything else, or an empty non-nil
	// list, makes Run return ErrBadConfig.
	Faults []string
	// Dir is the run's base znode (default "/nemesis/<recipe>"); the
	// recipe's directory is Dir+"/lock", the znode register Dir+"/register".
	// It is deleted before and after the run.
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

// Run runs recipe r against cl under the nemesis for cfg.Duration, heals
// every fault, measures the recovery, closes every client, and checks the
// history (Check) and the servers (no znode left under the recipe's
// directory, watch count back to its baseline, no goroutine left). The
// returned error is for a run that could not be carried out (no connection
// to the servers, or ctx ended before the checks were done: the Result is
// then partial); broken invariants are in Report.Violations.
func Run(ctx context.Context, cl *zktest.Cluster, r Recipe, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(r)
	leakOpts := []goleak.Option{goleak.IgnoreCurrent(),
		// the reaper of a server process restarted by the nemesis
		goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/zktest.(*localCluster).spawnNode.func1")}

	admin, err := dialAdmin(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer admin.close()
	st, sqlReg, err := prepare(ctx, cl, admin, cfg)
	if err != nil {
		return nil, err
	}
	w := &workload{cfg: cfg, r: r, rec: newRecorder(), regPath: st.regPath, sql: sqlReg}
	if err := w.connectAll(ctx, cl, st.lockDir); err != nil {
		return nil, err
	}
	T := w.clients[0].s.SessionTimeout()
	h := &History{Format: HistoryFormat, Recipe: r.Name, Seed: cfg.Seed, Clients: cfg.Clients, SessionTimeout: T}

	// The workload, the nemesis, then the heal.
	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	clientsDone := w.start(wctx)
	n := st.faultAndHeal(ctx, w, h, T)

	// Stop and close every client.
	stopWork()
	w.stop(clientsDone)
	h.End = w.rec.now()
	time.Sleep(50 * time.Millisecond) // let the last context.AfterFunc callbacks record their ends
	h.Grants, h.Ops = w.rec.snapshot()
	h.Faults = n.snapshot()
	h.FirstGrantAfterHeal = w.rec.firstGrantAfter(h.Healed)

	rep := Check(h, r.Allowed)
	st.checkServers(ctx, rep) // leftovers at the servers
	admin.close()
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

// stage is where a run plays at the servers: its znodes, the admin
// connection that sets them up and checks them, and the servers' watch
// count before the run.
type stage struct {
	cl       *zktest.Cluster
	cfg      Config
	admin    *adminConn
	base     string // the run's base znode, chroot included
	lockDir  string // the recipe's directory, below the chroot
	regPath  string // the znode register, below the chroot
	baseline int    // the servers' watch count before the run
}

// prepare clears the run's base znode, creates the znode register, resets
// the SQL register if cfg has one, and reads the servers' watch count.
func prepare(ctx context.Context, cl *zktest.Cluster, admin *adminConn, cfg Config) (*stage, *sqlRegister, error) {
	st := &stage{cl: cl, cfg: cfg, admin: admin, base: cl.Chroot() + cfg.Dir,
		lockDir: cfg.Dir + "/lock", regPath: cfg.Dir + "/register"}
	if err := deleteAll(admin.conn, st.base); err != nil {
		return nil, nil, fmt.Errorf("nemesis: clearing %s: %w", st.base, err)
	}
	if err := createAll(admin.conn, cl.Chroot()+st.regPath, nil); err != nil { // empty: fencezk's empty register
		return nil, nil, fmt.Errorf("nemesis: creating the register: %w", err)
	}
	var sqlReg *sqlRegister
	var err error
	if cfg.SQL != nil {
		if sqlReg, err = newSQLRegister(ctx, cfg.SQL, cfg.Dir); err != nil {
			return nil, nil, err
		}
	}
	if st.baseline, err = watchCount(ctx, cl); err != nil {
		return nil, nil, fmt.Errorf("nemesis: baseline watch count: %w", err)
	}
	return st, sqlReg, nil
}

// faultAndHeal runs the nemesis for cfg.Duration, heals every fault, and
// waits up to T+3 s for a grant after the heal (recorded in h.Healed); if
// none comes, it records in h.Diagnosis what the servers hold while the
// clients still wait. It returns the nemesis, whose faults h lists.
func (st *stage) faultAndHeal(ctx context.Context, w *workload, h *History, T time.Duration) *nemesis {
	n := newNemesis(st.cl, w, st.admin.conn, st.cl.Chroot()+st.lockDir, st.cfg, T)
	nctx, stopFaults := context.WithTimeout(ctx, st.cfg.Duration)
	n.run(nctx)
	stopFaults()
	if err := n.heal(ctx); err != nil {
		st.cfg.Logf("nemesis: heal: %v", err)
	}
	h.Healed = w.rec.now()
	deadline := time.Now().Add(T + 3*time.Second)
	for time.Now().Before(deadline) && w.rec.firstGrantAfter(h.Healed) < 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if w.rec.firstGrantAfter(h.Healed) < 0 && ctx.Err() == nil {
		// Stuck: look at the servers while the clients still wait.
		h.Diagnosis = diagnose(ctx, st.cl, st.cl.Chroot(), st.lockDir, w.clients)
		for _, l := range h.Diagnosis {
			st.cfg.Logf("no grant after the heal: %s", l)
		}
	}
	return n
}

// checkServers reports in rep what every client closed should have left
// clean at the servers: no znode under the recipe's directory (within
// 10 s, for the cleaners), and the watch count back to its baseline
// (within 10 s); it deletes the run's base znode in between.
func (st *stage) checkServers(ctx context.Context, rep *Report) {
	var left []string
	var err error
	for end := time.Now().Add(10 * time.Second); ; {
		left, err = listAll(st.admin.conn, st.cl.Chroot()+st.lockDir)
		if (err == nil && len(left) == 0) || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		rep.violate("listing %s after the run: %v", st.lockDir, err)
	} else if len(left) > 0 {
		rep.violate("%d znodes left under %s after every client closed: %s", len(left), st.lockDir, strings.Join(left, ", "))
	}
	if err := deleteAll(st.admin.conn, st.base); err != nil {
		st.cfg.Logf("nemesis: deleting %s: %v", st.base, err)
	}
	var wc int
	for end := time.Now().Add(10 * time.Second); ; {
		wc, err = watchCount(ctx, st.cl)
		if (err == nil && wc == st.baseline) || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || wc != st.baseline {
		rep.violate("server watch count %d after the run, baseline %d (%v)", wc, st.baseline, err)
	}
}

// ErrBadConfig is matched (errors.Is) by the error Run returns for a Config
// it cannot carry out: a negative count or duration, an unknown fault kind,
// or an empty, non-nil fault list.
var ErrBadConfig = errors.New("nemesis: bad config")

// Validate reports (ErrBadConfig) what Run would refuse; Run calls it first.
func (c Config) Validate() error {
	switch {
	case c.Clients < 0:
		return fmt.Errorf("%w: %d clients", ErrBadConfig, c.Clients)
	case c.Duration < 0, c.SessionTimeout < 0, c.FaultEvery < 0:
		return fmt.Errorf("%w: negative duration (Duration %v, SessionTimeout %v, FaultEvery %v)", ErrBadConfig, c.Duration, c.SessionTimeout, c.FaultEvery)
	case c.Faults != nil && len(c.Faults) == 0:
		return fmt.Errorf("%w: an empty fault list (nil means every kind)", ErrBadConfig)
	}
	for _, k := range c.Faults {
		if !slices.Contains(ServerFaults, k) && !slices.Contains(ClientFaults, k) {
			return fmt.Errorf("%w: unknown fault kind %q (known: %s, %s)", ErrBadConfig, k,
				strings.Join(ServerFaults, ", "), strings.Join(ClientFaults, ", "))
		}
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

func runTarget(ctx context.Context, t Target, r Recipe, cfg Config) (*Result, error) {
	return nil, errors.New("nemesis: RunTarget: not yet")
}
