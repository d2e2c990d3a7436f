package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/value"
	"go.uber.org/goleak"
)

// ValueClient is implemented by a Client whose backend has shared values
// (recipe.Value): ZooKeeper's (package value). RunValue needs it.
type ValueClient interface {
	// Value returns the shared value named name (a name the run owns,
	// under its base) on the client's session.
	Value(name string) (recipe.Value, error)
}

// Value is ZooKeeper's shared value (value.New) in the znode name, on the
// client's session, quiet as its locks are.
func (c *zkClient) Value(name string) (recipe.Value, error) {
	return value.New(c.s, name, value.WithLogger(slog.New(slog.DiscardHandler)))
}

// ValueFormat names the JSON layout of a ValueHistory.
const ValueFormat = "zkrecipes-nemesis-values/1"

// Kinds of ValueOp.
const (
	ValueGet = "get"
	ValueSet = "set" // TrySet
)

// Outcomes of a ValueOp.
const (
	// ValueOK: the call returned a Versioned (Got).
	ValueOK = "ok"
	// ValueConflict: TrySet returned recipe.ErrConflict: not applied.
	ValueConflict = "conflict"
	// ValueUnknown: any other error (unconfirmed, the context's, the
	// connection's): a TrySet may or may not have applied; a Get tells
	// nothing.
	ValueUnknown = "unknown"
)

// ValueState is a shared value as a call or a watch showed it.
type ValueState struct {
	Version int64
	Data    string
	Absent  bool // Data was nil (the value did not exist)
	Rev     int64
}

func stateOf(v recipe.Versioned) ValueState {
	return ValueState{Version: v.Version, Data: string(v.Data), Absent: v.Data == nil, Rev: v.Rev}
}

func (s ValueState) String() string {
	if s.Absent {
		return fmt.Sprintf("absent v%d@%d", s.Version, s.Rev)
	}
	return fmt.Sprintf("v%d=%q@%d", s.Version, s.Data, s.Rev)
}

// ValueOp is one Get or TrySet of a values run. Times are since the start
// of the run.
type ValueOp struct {
	Client int    // the client that called; Clients (one past the last) for the final read
	Kind   string // ValueGet, ValueSet
	// Expected and Data (set only) are TrySet's arguments: the version
	// expected and the data written (unique in the run). Stale marks an
	// expected version chosen not to be the one last read, on purpose.
	Expected int64  `json:",omitempty"`
	Data     string `json:",omitempty"`
	Stale    bool   `json:",omitempty"`
	Call     time.Duration
	Return   time.Duration
	Outcome  string     // ValueOK, ValueConflict, ValueUnknown
	Got      ValueState // ValueOK only: what the call returned
	Err      string     `json:",omitempty"`
}

// ValueEvent is one Versioned a client's Watch delivered.
type ValueEvent struct {
	Client int
	Watch  int // which Watch call of the client (a closed channel is watched again)
	At     time.Duration
	State  ValueState
}

// ValueHistory is everything a values run recorded.
type ValueHistory struct {
	Format         string
	Backend        string
	Seed           uint64
	Clients        int
	SessionTimeout time.Duration
	Path           string // the value's znode (below the chroot)
	Ops            []ValueOp
	Events         []ValueEvent
	Faults         []Fault
	// Healed is when every fault was undone; the writers stopped then.
	Healed time.Duration
	// Final is the fresh client's Get once the writers stopped (also in
	// Ops, as client Clients); FinalErr says why there is none.
	Final    ValueState
	FinalErr string `json:",omitempty"`
	// Last[i] is client i's last delivered state when the convergence
	// phase ended (the first equal to Final, or the last before the
	// bound), LastAt[i] when it was delivered (-1 if never).
	Last   []ValueState
	LastAt []time.Duration
	End    time.Duration
}

// WriteJSON writes h as indented JSON, with Format set to ValueFormat.
func (h *ValueHistory) WriteJSON(w io.Writer) error {
	c := *h
	c.Format = ValueFormat
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&c)
}

// ValueResult is a values run's history and the report of its checks.
type ValueResult struct {
	History *ValueHistory
	Report  *ValueReport
}

// Values is the Recipe of a values run, for RunValue: its Open makes each
// client's participant (a reader-writer and a watcher of the run's value
// on the client's session), which RunValue binds to the run's recorder
// once every client is connected. RunTarget cannot run it.
func Values() Recipe {
	return Recipe{Name: "values", Allowed: func([]Role) bool { return true }, Fenced: func(Role) bool { return false },
		Open: func(c Client, _ string) (Participant, error) {
			vc, ok := c.(ValueClient)
			if !ok {
				return nil, fmt.Errorf("nemesis: a %T client has no shared values (ValueClient)", c)
			}
			return &valueParticipant{vc: vc}, nil
		}}
}

// RunValue runs a shared value on t (ZooKeeper's target: its Version is
// the data version plus 1, which CheckValue's model counts on) under the
// nemesis for cfg.Duration with the engine's clients, proxies and faults:
// every client reads and compare-and-sets the one value
// cfg.Dir+"/value/v" on its own session (value.New): a Get, then a TrySet
// of unique data with the version read, sometimes with a stale or future
// version on purpose or with the version it last knew; each client also
// watches the value. After the heal the writers stop, a fresh client reads
// the value, and every watcher must deliver it within ConvergeBound(T).
// Then CheckValue, t's Leftovers and goleak check the run. cfg.Dir+"/lock"
// is not used: the delete-dir fault touches nothing of this run. The
// error is for a run that could not be carried out; t stays open.
func RunValue(ctx context.Context, t Target, cfg Config) (*ValueResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t.Name() != "zk" {
		return nil, fmt.Errorf("%w: values run on ZooKeeper's target only (CheckValue's model counts versions +1 per write), not %s", ErrBadConfig, t.Name())
	}
	r := Values()
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
	w := &workload{cfg: cfg, r: r, rec: newRecorder()}
	if err := w.connectAll(ctx, t, cfg.Dir+"/lock"); err != nil {
		return nil, err
	}
	T := t.SessionTimeout()
	name := cfg.Dir + "/value/v"
	h := &ValueHistory{Format: ValueFormat, Backend: t.Name(), Seed: cfg.Seed, Clients: cfg.Clients, SessionTimeout: T, Path: name}
	vr := &valueRecorder{start: w.rec.start, latest: map[int]ValueState{}, latestAt: map[int]time.Duration{}}
	quiet := make(chan struct{})
	for _, c := range w.clients {
		if err := c.p.(*valueParticipant).bind(w, c, vr, name, quiet); err != nil {
			w.closeClients()
			return nil, err
		}
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
	h.Healed = vr.now()
	waitTimeout(&vr.writers, 20*time.Second)
	h.Final, h.FinalErr = finalValue(ctx, t, cfg, vr, name)
	h.Last, h.LastAt = vr.converge(ctx, cfg.Clients, h.Final, h.FinalErr == "", h.Healed+ConvergeBound(T))

	stopWork()
	w.stop(clientsDone)
	h.End = vr.now()
	h.Ops, h.Events = vr.snapshot()
	h.Faults = n.snapshot()

	rep := CheckValue(h)
	lr := &Report{}
	checkLeftovers(ctx, t, lr)
	if re, ok := t.(RunEnder); ok {
		if err := re.EndRun(ctx); err != nil {
			lr.violate("%s: ending the run: %v", t.Name(), err)
		}
	}
	if err := goleak.Find(leakOpts...); err != nil {
		lr.violate("goroutines left after the run: %v", err)
	}
	for _, v := range lr.Violations {
		rep.violateAt(nowhere, "%s", v)
	}
	res := &ValueResult{History: h, Report: rep}
	if ctx.Err() != nil {
		return res, fmt.Errorf("nemesis: run interrupted: %w", context.Cause(ctx))
	}
	return res, nil
}

// finalValue connects a fresh client (index cfg.Clients, behind a proxy of
// its own that no fault touches) and reads the value (Get, recorded as that
// client's op), trying for up to 30 s.
func finalValue(ctx context.Context, t Target, cfg Config, vr *valueRecorder, name string) (ValueState, string) {
	p := serverkit.NewFaultProxy()
	defer p.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := t.Connect(cctx, cfg.Clients, p)
	cancel()
	if err != nil {
		return ValueState{}, "connecting the fresh client: " + err.Error()
	}
	defer c.Close()
	v, err := c.(ValueClient).Value(name)
	if err != nil {
		return ValueState{}, err.Error()
	}
	why := "no read"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; pause(ctx, 200*time.Millisecond) {
		op := vr.get(ctx, cfg.Clients, v)
		if op.Outcome == ValueOK {
			return op.Got, ""
		}
		why = "reading the value: " + op.Err
	}
	return ValueState{}, why
}

// Summary is one line of figures.
func (r *ValueReport) Summary() string {
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
	return fmt.Sprintf("gets %d ok, %d unknown; sets %d ok, %d conflict, %d unknown (%d stale on purpose); events %d (%d watches); final version %d; faults %s (%d failed); convergence %s (bound %v); violations %d",
		r.Gets[ValueOK], r.Gets[ValueUnknown], r.Sets[ValueOK], r.Sets[ValueConflict], r.Sets[ValueUnknown], r.Stale,
		r.Events, r.Watches, r.FinalVersion, strings.Join(fs, " "), failed, conv, r.Converge, len(r.Violations))
}
