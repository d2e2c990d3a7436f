package nemesis

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/fence/fencesql"
	"github.com/zkrecipes/zkrecipes/fence/fencezk"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
	"go.uber.org/goleak"
)

// The registers.
const (
	RegGuard = "guard" // an in-process value behind a fence.Guard
	RegZnode = "znode" // a fencezk.Register: a znode written with a versioned compare-and-set of the token
	RegSQL   = "sql"   // a row of a SQL database written in fencesql.Do (Config.SQL)
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
	base := cl.Chroot() + cfg.Dir
	lockDir := cfg.Dir + "/lock"
	regPath := cfg.Dir + "/register"
	if err := deleteAll(admin.conn, base); err != nil {
		return nil, fmt.Errorf("nemesis: clearing %s: %w", base, err)
	}
	if err := createAll(admin.conn, cl.Chroot()+regPath, nil); err != nil { // empty: fencezk's empty register
		return nil, fmt.Errorf("nemesis: creating the register: %w", err)
	}
	var sqlReg *sqlRegister
	if cfg.SQL != nil {
		if sqlReg, err = newSQLRegister(ctx, cfg.SQL, cfg.Dir); err != nil {
			return nil, err
		}
	}
	baseline, err := watchCount(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("nemesis: baseline watch count: %w", err)
	}

	w := &workload{cfg: cfg, r: r, rec: newRecorder(), regPath: regPath, sql: sqlReg}
	for i := range cfg.Clients {
		c, err := w.connect(ctx, cl, i, lockDir)
		if err != nil {
			w.closeClients()
			return nil, err
		}
		w.clients = append(w.clients, c)
	}
	T := w.clients[0].s.SessionTimeout()
	h := &History{Format: HistoryFormat, Recipe: r.Name, Seed: cfg.Seed, Clients: cfg.Clients, SessionTimeout: T}

	// The workload.
	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	w.ctx = wctx
	var clientsDone sync.WaitGroup
	for _, c := range w.clients {
		clientsDone.Add(1)
		go func() {
			defer clientsDone.Done()
			_ = c.p.Run(wctx, c.rng, func(hd Held) { w.hold(c, hd) }, func(asked time.Time, err error) { w.rec.failed(c.id, asked, err) })
		}()
	}

	// The nemesis, then the heal.
	n := newNemesis(cl, w, admin.conn, cl.Chroot()+lockDir, cfg, T)
	nctx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	n.run(nctx)
	stopFaults()
	if err := n.heal(ctx); err != nil {
		cfg.Logf("nemesis: heal: %v", err)
	}
	h.Healed = w.rec.now()
	deadline := time.Now().Add(T + 3*time.Second)
	for time.Now().Before(deadline) && w.rec.firstGrantAfter(h.Healed) < 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if w.rec.firstGrantAfter(h.Healed) < 0 && ctx.Err() == nil {
		// Stuck: look at the servers while the clients still wait.
		h.Diagnosis = diagnose(ctx, cl, cl.Chroot(), lockDir, w.clients)
		for _, l := range h.Diagnosis {
			cfg.Logf("no grant after the heal: %s", l)
		}
	}

	// Stop and close every client.
	stopWork()
	waitTimeout(&clientsDone, 20*time.Second)
	w.closeClients()
	clientsDone.Wait()
	h.End = w.rec.now()
	time.Sleep(50 * time.Millisecond) // let the last context.AfterFunc callbacks record their ends
	h.Grants, h.Ops = w.rec.snapshot()
	h.Faults = n.snapshot()
	h.FirstGrantAfterHeal = w.rec.firstGrantAfter(h.Healed)

	rep := Check(h, r.Allowed)

	// Leftovers at the servers.
	var left []string
	for end := time.Now().Add(10 * time.Second); ; {
		left, err = listAll(admin.conn, cl.Chroot()+lockDir)
		if (err == nil && len(left) == 0) || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		rep.violate("listing %s after the run: %v", lockDir, err)
	} else if len(left) > 0 {
		rep.violate("%d znodes left under %s after every client closed: %s", len(left), lockDir, strings.Join(left, ", "))
	}
	if err := deleteAll(admin.conn, base); err != nil {
		cfg.Logf("nemesis: deleting %s: %v", base, err)
	}
	var wc int
	for end := time.Now().Add(10 * time.Second); ; {
		wc, err = watchCount(ctx, cl)
		if (err == nil && wc == baseline) || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || wc != baseline {
		rep.violate("server watch count %d after the run, baseline %d (%v)", wc, baseline, err)
	}
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

// ---- clients ----

type client struct {
	id    int
	s     *zookeeper.Session
	proxy *zktest.FaultProxy
	tap   *zktest.SessionTap
	p     Participant
	reg   *fencezk.Register
	rng   *rand.Rand
}

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

func (w *workload) writeGuard(c *client, g *Grant, val string) {
	op := Op{Kind: OpWrite, Client: c.id, Grant: g.ID, Token: g.Token, Register: RegGuard, Value: val, Call: w.rec.now()}
	err := w.guard.Do(RegGuard, g.Token, func() error {
		w.gseq++
		op.Seq, op.Prev = w.gseq, w.gstate
		w.gstate = State{g.Token, val}
		op.Live = w.rec.live()
		return nil
	})
	op.Return = w.rec.now()
	switch {
	case err == nil:
		op.Outcome = Accepted
	case errors.Is(err, fence.ErrStale):
		op.Outcome, op.Err = Stale, err.Error()
	default:
		op.Outcome, op.Err = Failed, err.Error()
	}
	w.rec.op(op)
}

// writeZnode writes through the fencezk register: read, compare the
// stored token, setData with the version read, again after a concurrent
// write. The write's order is its new data version (prev.Version+1: 0 for
// the write that creates the znode), plus one, since Seq counts from 1.
func (w *workload) writeZnode(c *client, g *Grant, val string) {
	op := Op{Kind: OpWrite, Client: c.id, Grant: g.ID, Token: g.Token, Register: RegZnode, Value: val, Call: w.rec.now()}
	prev, err := c.reg.Write(context.Background(), g.Token, []byte(val))
	if err == nil {
		op.Live = w.rec.live()
	}
	op.Return = w.rec.now()
	op.Outcome, op.Err = outcome(err)
	if err == nil {
		op.Prev, op.Seq = State{prev.Token, string(prev.Data)}, int64(prev.Version)+2 // the new version, counted from 1
	}
	w.rec.op(op)
}

// outcome classifies a fenced write's error.
func outcome(err error) (Outcome, string) {
	switch {
	case err == nil:
		return Accepted, ""
	case errors.Is(err, fence.ErrStale):
		return Stale, err.Error()
	case errors.Is(err, fence.ErrUncertain):
		return Unknown, err.Error()
	}
	return Failed, err.Error()
}

// sqlRegister is the SQL register: the row named res of nemesis_register,
// written in fencesql.Do with res as the fenced resource.
type sqlRegister struct {
	f           *fencesql.Fence
	res         string
	read, write string
}

func newSQLRegister(ctx context.Context, db *sql.DB, res string) (*sqlRegister, error) {
	f, err := fencesql.New(db)
	if err != nil {
		return nil, fmt.Errorf("nemesis: SQL register: %w", err)
	}
	p := f.Dialect().Placeholder
	r := &sqlRegister{f: f, res: res,
		read:  "SELECT token, value, seq FROM nemesis_register WHERE name = " + p(1),
		write: fmt.Sprintf("UPDATE nemesis_register SET token = %s, value = %s, seq = %s WHERE name = %s", p(1), p(2), p(3), p(4))}
	for _, stmt := range []struct {
		q    string
		args []any
	}{
		{f.DDL(), nil},
		{"CREATE TABLE IF NOT EXISTS nemesis_register (name VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL, value TEXT NOT NULL, seq BIGINT NOT NULL)", nil},
		{"DELETE FROM " + fencesql.DefaultTable + " WHERE resource = " + p(1), []any{res}},
		{"DELETE FROM nemesis_register WHERE name = " + p(1), []any{res}},
		{"INSERT INTO nemesis_register (name, token, value, seq) VALUES (" + p(1) + ", 0, '', 0)", []any{res}},
	} {
		if _, err := db.ExecContext(ctx, stmt.q, stmt.args...); err != nil {
			return nil, fmt.Errorf("nemesis: SQL register: %s: %w", stmt.q, err)
		}
	}
	return r, nil
}

// writeSQL reads the register's row and writes it in the transaction that
// fencesql.Do advanced the fence row in. The write's order is the row's
// counter.
func (w *workload) writeSQL(c *client, g *Grant, val string) {
	op := Op{Kind: OpWrite, Client: c.id, Grant: g.ID, Token: g.Token, Register: RegSQL, Value: val, Call: w.rec.now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var prev State
	var seq int64
	err := w.sql.f.Do(ctx, w.sql.res, g.Token, func(tx *sql.Tx) error {
		var tok int64
		if err := tx.QueryRowContext(ctx, w.sql.read, w.sql.res).Scan(&tok, &prev.Value, &seq); err != nil {
			return err
		}
		prev.Token = fence.Token(tok)
		if _, err := tx.ExecContext(ctx, w.sql.write, int64(g.Token), val, seq+1, w.sql.res); err != nil {
			return err
		}
		op.Live = w.rec.live()
		return nil
	})
	op.Return = w.rec.now()
	op.Outcome, op.Err = outcome(err)
	if err == nil {
		op.Prev, op.Seq = prev, seq+1
	}
	w.rec.op(op)
}

// ---- the recorder ----

type recorder struct {
	start  time.Time
	mu     sync.Mutex
	grants []*grantRec
	active map[int]*grantRec
	ops    []Op
}

type grantRec struct {
	Grant
	ctx context.Context
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), active: map[int]*grantRec{}}
}

func (r *recorder) now() time.Duration { return time.Since(r.start) }

// grant registers a grant and samples the live leases (itself included).
func (r *recorder) grant(client int, hd Held) *Grant {
	r.mu.Lock()
	g := &grantRec{Grant: Grant{ID: len(r.grants), Client: client, Role: hd.Role, Token: hd.Token,
		Asked: hd.Asked.Sub(r.start), Granted: r.now(), Ended: -1}, ctx: hd.Ctx}
	r.grants = append(r.grants, g)
	r.active[g.ID] = g
	r.ops = append(r.ops, Op{Kind: OpGrant, Client: client, Grant: g.ID, Token: hd.Token, Call: g.Granted, Return: g.Granted, Live: r.liveLocked()})
	r.mu.Unlock()
	context.AfterFunc(hd.Ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if g.Ended < 0 {
			g.Ended = r.now()
		}
		g.Cause = context.Cause(g.ctx).Error()
		delete(r.active, g.ID)
	})
	return &g.Grant
}

// failed records an attempt to be granted that failed.
func (r *recorder) failed(client int, asked time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, Op{Kind: OpAcquire, Client: client, Grant: -1, Call: asked.Sub(r.start), Return: r.now(), Err: err.Error()})
}

// giveUp records that the holder is about to give the grant up.
func (r *recorder) giveUp(g *Grant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g.Ended < 0 {
		g.Ended = r.now()
	}
}

func (r *recorder) probe(client int, g *Grant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.now()
	r.ops = append(r.ops, Op{Kind: OpProbe, Client: client, Grant: g.ID, Token: g.Token, Call: t, Return: t, Live: r.liveLocked()})
}

func (r *recorder) op(o Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

// live lists the grants whose lease context is not done, read now.
func (r *recorder) live() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveLocked()
}

func (r *recorder) liveLocked() []int {
	var ids []int
	for id, g := range r.active {
		if g.ctx.Err() == nil {
			ids = append(ids, id)
		}
	}
	if ids == nil {
		ids = []int{}
	}
	return ids
}

func (r *recorder) firstGrantAfter(t time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.grants {
		if g.Granted >= t {
			return g.Granted
		}
	}
	return -1
}

func (r *recorder) snapshot() ([]Grant, []Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gs := make([]Grant, len(r.grants))
	for i, g := range r.grants {
		gs[i] = g.Grant
	}
	return gs, append([]Op(nil), r.ops...)
}

// ---- the admin connection (no proxy) ----

type adminConn struct {
	conn *zk.Conn
	once sync.Once
	done chan struct{}
}

func dialAdmin(ctx context.Context, cl *zktest.Cluster) (*adminConn, error) {
	conn, events, err := zk.Connect(cl.Addrs(), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, fmt.Errorf("nemesis: admin connection: %w", err)
	}
	a := &adminConn{conn: conn, done: make(chan struct{})}
	connected := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(a.done)
		for ev := range events {
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(connected) })
			}
		}
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-connected:
		return a, nil
	case <-t.C:
		err = errors.New("no session within 30 s")
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	a.close()
	return nil, fmt.Errorf("nemesis: admin connection: %w", err)
}

func (a *adminConn) close() {
	a.once.Do(func() {
		a.conn.Close()
		<-a.done
	})
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// deleteAll deletes p and everything below it, retrying while clients add
// children meanwhile.
func deleteAll(conn *zk.Conn, p string) error {
	for attempt := 0; ; attempt++ {
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, ch := range children {
			if err := deleteAll(conn, path.Join(p, ch)); err != nil {
				return err
			}
		}
		err = conn.Delete(p, -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrNotEmpty) && attempt < 20:
			continue
		default:
			return err
		}
	}
}

// createAll creates p (with data) and its missing parents as persistent
// znodes.
func createAll(conn *zk.Conn, p string, data []byte) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := ""
	for i, part := range parts {
		cur += "/" + part
		var d []byte
		if i == len(parts)-1 {
			d = data
		}
		if _, err := conn.Create(cur, d, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}

// listAll lists every znode below p (not p itself).
func listAll(conn *zk.Conn, p string) ([]string, error) {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range children {
		cp := path.Join(p, ch)
		out = append(out, cp)
		below, err := listAll(conn, cp)
		if err != nil {
			return nil, err
		}
		out = append(out, below...)
	}
	return out, nil
}

// watchCount sums the watches of every server.
func watchCount(ctx context.Context, cl *zktest.Cluster) (int, error) {
	total := 0
	for _, a := range cl.Addrs() {
		n, err := zktest.WatchCount(ctx, a)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
