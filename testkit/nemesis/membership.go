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

	"github.com/zkrecipes/zkrecipes/group"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"go.uber.org/goleak"
)

// GroupClient is implemented by a Client whose backend has group
// membership (recipe.Group): ZooKeeper's (package group) and etcd's
// (etcdlock.NewGroup). RunMembership needs it.
type GroupClient interface {
	// Group returns the group named name (a name the run owns, under its
	// base, as for Client.Lock) on the client's session.
	Group(name string) (recipe.Group, error)
}

// Group is ZooKeeper's group membership (group.New) in directory name, on
// the client's session, quiet as its locks are.
func (c *zkClient) Group(name string) (recipe.Group, error) {
	return group.New(c.s, name, group.WithLogger(slog.New(slog.DiscardHandler)))
}

// MembershipFormat names the JSON layout of a MembershipHistory.
const MembershipFormat = "zkrecipes-nemesis-members/1"

// MemberSpan is one registration of a member as its client saw it
// (Member.Listen): from the Registration that began it to the one that
// ended it. Times are since the start of the run.
type MemberSpan struct {
	Client int
	ID     string
	Member int   // which Join of the client made the Member (0, 1, ...)
	Since  int64 // the registration's creation revision
	// Asked is the earliest its node or key can have been created: the
	// Join call for a Member's first registration, the end of the Member's
	// previous registration for the ones it made again by itself.
	Asked time.Duration
	Start time.Duration // Listen delivered it (Registered true)
	End   time.Duration // Listen delivered its end; -1 if still live when the run stopped
	Cause string        `json:",omitempty"`
}

// Kinds of MemberCall.
const (
	CallJoin   = "join"
	CallUpdate = "update"
	CallLeave  = "leave"
)

// MemberCall is one call of Group.Join, Member.Update or Member.Leave.
type MemberCall struct {
	Client int
	ID     string
	Member int    // the Member it made (join) or was called on
	Kind   string // CallJoin, CallUpdate, CallLeave
	Value  string `json:",omitempty"` // the data written (join, update): unique in the run
	Seq    int    // the value's order among the client's values (0 for leave)
	Call   time.Duration
	Return time.Duration
	Err    string `json:",omitempty"`
}

// ViewMember is one member of a recorded view.
type ViewMember struct {
	ID    string
	Since int64
	Data  string
}

// ViewRec is one View a watcher delivered, or the final read.
type ViewRec struct {
	Watcher int // the client whose session watched; -1 for the final read
	Watch   int // which Watch call of the watcher (a closed channel is watched again)
	At      time.Duration
	Rev     int64
	Members []ViewMember
}

// MembershipHistory is everything a membership run recorded.
type MembershipHistory struct {
	Format         string
	Backend        string
	Seed           uint64
	Clients        int
	SessionTimeout time.Duration
	Spans          []MemberSpan
	Calls          []MemberCall
	Views          []ViewRec
	Faults         []Fault
	// Healed is when every fault was undone and every server served
	// again; the members stopped changing (no more Join, Update or Leave)
	// then.
	Healed time.Duration
	// Final is the group as a fresh client read it (Members) once every
	// watcher showed it, or when the convergence bound had passed;
	// FinalErr says why there is none.
	Final    ViewRec
	FinalErr string `json:",omitempty"`
	// Stopped is when the watchers stopped recording and the members began
	// to leave or close; End when every client had closed.
	Stopped, End time.Duration
}

// WriteJSON writes h as indented JSON, with Format set to
// MembershipFormat.
func (h *MembershipHistory) WriteJSON(w io.Writer) error {
	c := *h
	c.Format = MembershipFormat
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&c)
}

// MembershipResult is a membership run's history and the report of its
// checks.
type MembershipResult struct {
	History *MembershipHistory
	Report  *MembershipReport
}

// ConvergeBound is how long after the heal every watcher must show the
// group's final state: two session timeouts (a cut-off member's node
// expires, its member registers again) and 5 s.
func ConvergeBound(T time.Duration) time.Duration { return 2*T + 5*time.Second }

// Members is the Recipe of a membership run, for RunMembership (and for
// listing beside the lock recipes): its Open makes each client's member
// and watcher, which RunMembership binds to the run's recorder once every
// client is connected. RunTarget cannot run it: its participants return
// an error at once.
func Members() Recipe {
	return Recipe{Name: "members", Allowed: func([]Role) bool { return true }, Fenced: func(Role) bool { return false },
		Open: func(c Client, dir string) (Participant, error) {
			gc, ok := c.(GroupClient)
			if !ok {
				return nil, fmt.Errorf("nemesis: a %T client has no group membership (GroupClient)", c)
			}
			g, err := gc.Group(dir)
			if err != nil {
				return nil, err
			}
			return &memberParticipant{g: g}, nil
		}}
}

// RunMembership runs group membership on t under the nemesis for
// cfg.Duration with the engine's clients, proxies and faults: client i joins
// cfg.Dir+"/lock" as "c<i>", updates, leaves and joins again at random, and
// watches the group on its own session; after the heal a fresh client reads
// the group until every watcher agrees (or ConvergeBound passes). Then
// CheckMembership, t's Leftovers and goleak check the run. The error is for
// a run that could not be carried out; cfg.SQL is not used; t stays open.
func RunMembership(ctx context.Context, t Target, cfg Config) (*MembershipResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := Members()
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
	dir := cfg.Dir + "/lock"
	w := &workload{cfg: cfg, r: r, rec: newRecorder()}
	if err := w.connectAll(ctx, t, dir); err != nil {
		return nil, err
	}
	T := t.SessionTimeout()
	mr := &memberRecorder{start: w.rec.start, open: map[[2]int]*MemberSpan{}}
	quiet := make(chan struct{})
	for _, c := range w.clients {
		c.p.(*memberParticipant).bind(w, c, mr, quiet)
	}
	h := &MembershipHistory{Format: MembershipFormat, Backend: t.Name(), Seed: cfg.Seed, Clients: cfg.Clients, SessionTimeout: T}

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
	h.Healed = mr.now()
	h.Final, h.FinalErr = converge(ctx, t, cfg, dir, mr, h.Healed+ConvergeBound(T))

	h.Stopped = mr.stop()
	stopWork()
	w.stop(clientsDone)
	mr.endListeners()
	h.End = mr.now()
	h.Spans, h.Calls, h.Views = mr.snapshot()
	h.Faults = n.snapshot()

	rep := CheckMembership(h)
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
	res := &MembershipResult{History: h, Report: rep}
	if ctx.Err() != nil {
		return res, fmt.Errorf("nemesis: run interrupted: %w", context.Cause(ctx))
	}
	return res, nil
}

// converge connects a fresh client (index cfg.Clients, behind a proxy of
// its own that no fault touches) and reads the group every 200 ms until
// what it read shows every member joined and every watcher's latest view
// equals it, or deadline (since the start of the run) has passed; it
// returns the last read.
func converge(ctx context.Context, t Target, cfg Config, dir string, mr *memberRecorder, deadline time.Duration) (ViewRec, string) {
	p := serverkit.NewFaultProxy()
	defer p.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := t.Connect(cctx, cfg.Clients, p)
	cancel()
	if err != nil {
		return ViewRec{Watcher: -1}, "connecting the fresh client: " + err.Error()
	}
	defer c.Close()
	gc, ok := c.(GroupClient)
	if !ok {
		return ViewRec{Watcher: -1}, fmt.Sprintf("a %T client has no group membership", c)
	}
	g, err := gc.Group(dir)
	if err != nil {
		return ViewRec{Watcher: -1}, err.Error()
	}
	final, why := ViewRec{Watcher: -1}, "no read"
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := g.Members(rctx)
		cancel()
		if err == nil {
			final, why = mr.viewRec(-1, 0, v), ""
			if mr.allShow(cfg.Clients, final) {
				return final, ""
			}
		} else {
			why = "reading the group: " + err.Error()
		}
		if mr.now() > deadline || ctx.Err() != nil {
			return final, why
		}
		pause(ctx, 200*time.Millisecond)
	}
}

// sameMembers reports whether two views show the same members (ids, Since
// and data).
func sameMembers(a, b []ViewMember) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func spanEnd(s *MemberSpan) string {
	if s.End < 0 {
		return "the end of the run"
	}
	return s.End.String()
}

func viewName(v *ViewRec) string {
	if v.Watcher < 0 {
		return fmt.Sprintf("the final read at %v (Rev %d)", v.At, v.Rev)
	}
	return fmt.Sprintf("watcher %d's view at %v (Rev %d)", v.Watcher, v.At, v.Rev)
}

func showMembers(ms []ViewMember) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s@%d=%s", m.ID, m.Since, m.Data))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Summary is one line of figures.
func (r *MembershipReport) Summary() string {
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
	return fmt.Sprintf("views %d (%d watches); registrations %d; joins %d (%d failed), updates %d (%d failed), leaves %d (%d failed); faults %s (%d failed); shown after end up to %v; convergence %s (bound %v); violations %d",
		r.Views, r.Watches, r.Registrations, r.Calls[CallJoin], r.CallErrors[CallJoin], r.Calls[CallUpdate], r.CallErrors[CallUpdate],
		r.Calls[CallLeave], r.CallErrors[CallLeave], strings.Join(fs, " "), failed, r.ShownAfterEnd.Round(time.Millisecond), conv, r.Converge, len(r.Violations))
}
