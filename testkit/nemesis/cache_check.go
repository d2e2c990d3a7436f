package nemesis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// CacheReport is what CheckCache found.
type CacheReport struct {
	Ops       map[string]int // outcome -> writes (a Multi's two ops counted apart)
	Events    int            // events the listeners got
	Listeners int
	Snaps     int // Snapshots checked (the convergence phase's included)
	SnapErrs  int
	Faults    map[string]int // kind -> faults attempted
	// FaultsFailed counts by kind the attempts that failed or may not have
	// taken effect.
	FaultsFailed map[string]int
	// Convergence is the latest any cache showed the final tree, counted
	// from the heal (-1 if some never did); Converge is its bound.
	Convergence time.Duration
	Converge    time.Duration
	Violations  []string
	Where       []Span // Where[i] locates Violations[i] (nowhere if about no interval)
	capped      map[string]int
}

func (r *CacheReport) violateAt(where Span, format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	r.Where = append(r.Where, where)
}

// violateIn reports a violation of check, up to maxPerCheck of them (as
// MembershipReport's).
func (r *CacheReport) violateIn(check string, where Span, format string, args ...any) {
	r.capped[check]++
	if r.capped[check] <= maxPerCheck {
		r.violateAt(where, check+": "+format, args...)
	}
}

// cacheIndex is a history's writes, indexed, with each op's zxid window.
type cacheIndex struct {
	h       *CacheHistory
	byValue map[string]*CacheOp
	byPath  map[string][]*CacheOp // in the writer's order
	lo, hi  map[*CacheOp]int64
}

// indexCache indexes h's ops. An applied op's window is its Zxid; a maybe
// op's is strictly between the zxids of its writer's applied ops that
// returned before it was called and that were called after it returned
// (a lost request is applied before its session's next request is, or
// never).
func indexCache(h *CacheHistory) *cacheIndex {
	x := &cacheIndex{h: h, byValue: map[string]*CacheOp{}, byPath: map[string][]*CacheOp{}, lo: map[*CacheOp]int64{}, hi: map[*CacheOp]int64{}}
	byWriter := map[int][]*CacheOp{}
	for i := range h.Ops {
		o := &h.Ops[i]
		if o.Value != "" {
			x.byValue[o.Value] = o
		}
		x.byPath[o.Path] = append(x.byPath[o.Path], o)
		byWriter[o.Writer] = append(byWriter[o.Writer], o)
	}
	for _, ops := range byWriter {
		for _, o := range ops {
			if o.Outcome == CacheApplied {
				x.lo[o], x.hi[o] = o.Zxid, o.Zxid
				continue
			}
			lo, hi := int64(1), int64(math.MaxInt64)
			for _, p := range ops {
				if p.Outcome != CacheApplied {
					continue
				}
				if p.Return <= o.Call {
					lo = max(lo, p.Zxid+1)
				} else if p.Call >= o.Return {
					hi = min(hi, p.Zxid-1)
				}
			}
			x.lo[o], x.hi[o] = lo, hi
		}
	}
	return x
}

// after reports whether b follows a on their node (its writer's order).
func after(a, b *CacheOp) bool { return b.Call > a.Call || b.Call == a.Call && b.Return > a.Return }

// badState says why n cannot be its node's state at Rev rev ("" if it
// can): its data must be written to its path by a write not refused, its
// Modified in that write's window (and Created too for a create; for a set,
// Created that of a create before it), no later than rev, and no later
// write of the node applied by rev.
func (x *cacheIndex) badState(n CacheNode, rev int64) string {
	w := x.byValue[n.Data]
	switch {
	case w == nil:
		return fmt.Sprintf("data %q was never written", n.Data)
	case w.Path != n.Path:
		return fmt.Sprintf("data %q was written to %s", n.Data, w.Path)
	case w.Outcome == CacheFailed:
		return fmt.Sprintf("data %q is that of a write the server refused (%s)", n.Data, w.Err)
	case n.Modified < x.lo[w] || n.Modified > x.hi[w]:
		return fmt.Sprintf("Modified %d, but the %s of %q (%s) took effect in [%d, %d]", n.Modified, w.Kind, n.Data, w.Outcome, x.lo[w], x.hi[w])
	case w.Kind == CacheCreate && n.Created != n.Modified:
		return fmt.Sprintf("Created %d, Modified %d, but %q was written by a create", n.Created, n.Modified, n.Data)
	case w.Kind == CacheSet && w.Outcome == CacheApplied && n.Created != w.Created:
		return fmt.Sprintf("Created %d, but the set of %q applied to the node created at %d", n.Created, n.Data, w.Created)
	case w.Kind == CacheSet && !slices.ContainsFunc(x.byPath[n.Path], func(c *CacheOp) bool {
		return c.Kind == CacheCreate && c.Outcome != CacheFailed && after(c, w) && x.lo[c] <= n.Created && n.Created <= x.hi[c]
	}):
		return fmt.Sprintf("Created %d, which no create of %s before the set of %q could have", n.Created, n.Path, n.Data)
	case n.Modified > rev:
		return fmt.Sprintf("Modified %d is after the Rev", n.Modified)
	}
	for _, o := range x.byPath[n.Path] {
		if after(w, o) && o.Outcome == CacheApplied && o.Zxid <= rev {
			return fmt.Sprintf("the %s of %q (%s) was superseded at %d by the %s %s", w.Kind, n.Data, w.Outcome, o.Zxid, o.Kind, opName(o))
		}
	}
	return ""
}

// badAbsence says why the node at p cannot be absent at Rev rev ("" if it
// can): the last write of it applied by rev made it, and no delete after
// that write could have taken effect by rev.
func (x *cacheIndex) badAbsence(p string, rev int64) string {
	var w *CacheOp
	for _, o := range x.byPath[p] {
		if o.Outcome == CacheApplied && o.Zxid <= rev && (w == nil || after(w, o)) {
			w = o
		}
	}
	if w == nil || w.Kind == CacheDelete {
		return ""
	}
	for _, o := range x.byPath[p] {
		if after(w, o) && o.Kind == CacheDelete && o.Outcome != CacheFailed && x.lo[o] <= rev {
			return ""
		}
	}
	return fmt.Sprintf("absent, but the %s %s made it at %d and no delete of it could have taken effect by then", w.Kind, opName(w), w.Zxid)
}

// deleteAfter returns the applied delete of p that took effect after rev
// and was called before at (nil if none): the delete a NodeDeleted event
// with Rev rev, got at at, reports.
func (x *cacheIndex) deleteAfter(p string, rev int64, at time.Duration) *CacheOp {
	for _, o := range x.byPath[p] {
		if o.Kind == CacheDelete && o.Outcome == CacheApplied && o.Zxid > rev && o.Call <= at {
			return o
		}
	}
	return nil
}

func opName(o *CacheOp) string {
	return fmt.Sprintf("of %s by writer %d (%q, called at %v, returned at %v)", o.Path, o.Writer, o.Value, o.Call, o.Return)
}

// The rules of CheckCache, on the history of a caches run, T the session
// timeout:
//
//   - a state (Created, Modified, Data) of a node is possible at a point R
//     of the server's order when Data was written to that node by a write
//     the server did not refuse, Modified is that write's zxid (an applied
//     one's exactly; a maybe-applied one's strictly between its writer's
//     neighbouring applied ops'), Created is Modified for a create and
//     the node's creation for a set, Modified <= R, and no later write of
//     that node was applied at or before R; a node is possibly absent at R
//     unless the last write of it applied by R made it and no delete after
//     that write could have taken effect by R (a maybe delete counts from
//     its window's start);
//   - each listener's events: Rev never goes back; per node, Created never
//     goes back and Modified never goes back for one Created; each
//     NodeCreated or NodeChanged state is possible at its Rev, each
//     NodeDeleted absence too and its Node is the state last reported; a
//     NodeCreated of a node held, or a NodeChanged or NodeDeleted of one
//     not held, is a violation (the states a listener started on a
//     loaded cache gets before CacheInitialized are a check of their own,
//     "late listener"; a NodeDeleted whose Rev precedes the delete it
//     reports is one of its own, "deleted early": a cache that stamps it
//     with the last reply's zxid, as a notification carries none before
//     ZooKeeper 3.9); the NodeCreated events before
//     CacheInitialized are a snapshot at its Rev (next rule);
//   - a snapshot at Rev R: sorted, each path once, every node a possible
//     state at R, every other node written in the run possibly absent at R;
//   - two Snapshots of one Rev (any caches) show the same tree;
//   - the final read is such a snapshot at R = +inf (every applied write
//     counted);
//   - convergence: each cache's last Snapshot after the heal equals the
//     final read and was taken within ConvergeBound(T) of the heal;
//   - no cache stopped following (Err) before the end of the run.

// CheckCache checks a caches history by the rules listed above.
func CheckCache(h *CacheHistory) *CacheReport {
	r := &CacheReport{Ops: map[string]int{}, Faults: map[string]int{}, FaultsFailed: map[string]int{}, SnapErrs: h.SnapErrs,
		Convergence: -1, Converge: ConvergeBound(h.SessionTimeout), capped: map[string]int{}}
	for _, o := range h.Ops {
		r.Ops[o.Outcome]++
	}
	for _, f := range h.Faults {
		r.Faults[f.Kind]++
		if f.Err != "" {
			r.FaultsFailed[f.Kind]++
		}
	}
	x := indexCache(h)
	r.checkEvents(x)
	byRev := map[int64]*CacheSnap{}
	for i := range h.Snaps {
		r.Snaps++
		s := &h.Snaps[i]
		if p := byRev[s.Rev]; p == nil {
			byRev[s.Rev] = s
		} else if !slices.Equal(p.Nodes, s.Nodes) {
			r.violateIn("one state per Rev", Span{p.At, s.At}, "cache %d's Snapshot at %v and cache %d's at %v both have Rev %d but show %s and %s",
				p.Cache, p.At, s.Cache, s.At, s.Rev, showNodes(p.Nodes), showNodes(s.Nodes))
		}
		r.checkSnap(x, "snapshot", fmt.Sprintf("cache %d's Snapshot at %v (Rev %d)", s.Cache, s.At, s.Rev), s.At, s.Rev, s.Nodes)
	}
	if h.FinalErr == "" {
		r.checkSnap(x, "snapshot", fmt.Sprintf("the final read at %v", h.Final.At), h.Final.At, math.MaxInt64, h.Final.Nodes)
	}
	r.checkConverged(h)
	for _, e := range h.CacheErrs {
		r.violateIn("cache stopped", nowhere, "%s", e)
	}
	for check, n := range r.capped {
		if n > maxPerCheck {
			r.violateAt(nowhere, "%s: %d more violations not listed", check, n-maxPerCheck)
		}
	}
	return r
}

// checkSnap checks a snapshot (name, taken at at) of the tree at rev; its
// violations are check's.
func (r *CacheReport) checkSnap(x *cacheIndex, check, name string, at time.Duration, rev int64, nodes []CacheNode) {
	where := Span{at, at}
	shown := map[string]bool{}
	for i, n := range nodes {
		if i > 0 && n.Path <= nodes[i-1].Path {
			r.violateIn("snapshot shape", where, "%s lists %s after %s (not sorted, or twice)", name, n.Path, nodes[i-1].Path)
		}
		shown[n.Path] = true
		if why := x.badState(n, rev); why != "" {
			r.violateIn(check, where, "%s shows %s = %q (Created %d, Modified %d): %s", name, n.Path, n.Data, n.Created, n.Modified, why)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(x.byPath)) {
		if shown[p] {
			continue
		}
		if why := x.badAbsence(p, rev); why != "" {
			r.violateIn(check, where, "%s lacks %s: %s", name, p, why)
		}
	}
}

// cacheListener is what checkEvents knows of one listener.
type cacheListener struct {
	late    bool // started on a cache already loaded (Listener > 0)
	rev     int64
	at      time.Duration
	held    map[string]CacheNode
	loading bool // CacheInitialized not got yet
}

// check names the check of the listener's states: "late listener" for the
// content a listener started on a loaded cache gets before
// CacheInitialized, "event state" otherwise.
func (l *cacheListener) check() string {
	if l.late && l.loading {
		return "late listener"
	}
	return "event state"
}

// checkEvents checks each listener's events in the order it got them.
func (r *CacheReport) checkEvents(x *cacheIndex) {
	ls := map[[2]int]*cacheListener{}
	for i := range x.h.Events {
		e := &x.h.Events[i]
		r.Events++
		key := [2]int{e.Cache, e.Listener}
		l := ls[key]
		if l == nil {
			l = &cacheListener{late: e.Listener > 0, held: map[string]CacheNode{}, loading: true}
			ls[key] = l
			r.Listeners++
		}
		name := fmt.Sprintf("cache %d listener %d: %s event at %v (Rev %d)", e.Cache, e.Listener, e.Kind, e.At, e.Rev)
		if e.Rev < l.rev {
			r.violateIn("rev order", Span{l.at, e.At}, "%s: Rev went back from %d (at %v)", name, l.rev, l.at)
		}
		l.rev, l.at = max(l.rev, e.Rev), e.At
		if e.Kind == recipe.CacheInitialized.String() {
			if l.loading {
				content := slices.SortedFunc(maps.Values(l.held), func(a, b CacheNode) int { return strings.Compare(a.Path, b.Path) })
				r.checkSnap(x, l.check(), fmt.Sprintf("cache %d listener %d's content before CacheInitialized (at %v, Rev %d)", e.Cache, e.Listener, e.At, e.Rev), e.At, e.Rev, content)
			} else {
				r.violateIn("event shape", Span{e.At, e.At}, "%s: a second CacheInitialized", name)
			}
			l.loading = false
			continue
		}
		r.checkEvent(x, l.check(), name, e, l.held)
	}
}

// checkEvent checks one node event e (named name) against the states the
// listener holds (held, updated).
func (r *CacheReport) checkEvent(x *cacheIndex, check, name string, e *CacheEventRec, held map[string]CacheNode) {
	where := Span{e.At, e.At}
	n := e.Node
	old, had := held[n.Path]
	switch e.Kind {
	case recipe.NodeCreated.String(), recipe.NodeChanged.String():
		if had != (e.Kind == recipe.NodeChanged.String()) {
			r.violateIn("event shape", where, "%s of %s, held: %t", name, n.Path, had)
		}
		if had && (n.Created < old.Created || n.Created == old.Created && n.Modified < old.Modified) {
			r.violateIn("state order", where, "%s: %s went back from Created %d Modified %d (%q) to Created %d Modified %d (%q)",
				name, n.Path, old.Created, old.Modified, old.Data, n.Created, n.Modified, n.Data)
		}
		if why := x.badState(n, e.Rev); why != "" {
			r.violateIn(check, where, "%s: %s = %q (Created %d, Modified %d): %s", name, n.Path, n.Data, n.Created, n.Modified, why)
		}
		held[n.Path] = n
	case recipe.NodeDeleted.String():
		if !had || old != n {
			r.violateIn("event shape", where, "%s of %s: Node %s, held %t %s", name, n.Path, showNodes([]CacheNode{n}), had, showNodes([]CacheNode{old}))
		}
		if why := x.badAbsence(n.Path, e.Rev); why != "" {
			if d := x.deleteAfter(n.Path, e.Rev, e.At); d != nil {
				check, why = "deleted early", fmt.Sprintf("%s; the delete it reports took effect at %d, after the Rev", why, d.Zxid)
			}
			r.violateIn(check, where, "%s: %s %s", name, n.Path, why)
		}
		delete(held, n.Path)
	default:
		r.violateIn("event shape", where, "%s: unknown kind", name)
	}
}

// checkConverged checks that each cache's last Snapshot after the heal is
// the final read, taken within Converge of the heal.
func (r *CacheReport) checkConverged(h *CacheHistory) {
	if h.FinalErr != "" {
		r.violateAt(Span{h.Healed, h.End}, "convergence: no final read of the tree: %s", h.FinalErr)
		return
	}
	conv := time.Duration(0)
	for i := range h.Clients {
		var s *CacheSnap
		if i < len(h.Last) && h.Last[i].At >= 0 {
			s = &h.Last[i]
		}
		switch {
		case s == nil:
			r.violateAt(Span{h.Healed, h.End}, "convergence: cache %d gave no Snapshot after the heal", i)
			conv = -1
		case !slices.Equal(s.Nodes, h.Final.Nodes):
			r.violateAt(Span{h.Healed, s.At}, "convergence: cache %d's last Snapshot (at %v, Rev %d) %s is not the final read (at %v) %s",
				i, s.At, s.Rev, showNodes(s.Nodes), h.Final.At, showNodes(h.Final.Nodes))
			conv = -1
		case s.At > h.Healed+r.Converge:
			r.violateAt(Span{h.Healed, s.At}, "convergence: cache %d showed the final tree only %v after the heal (bound %v)", i, s.At-h.Healed, r.Converge)
		}
		if conv >= 0 && s != nil {
			conv = max(conv, s.At-h.Healed)
		}
	}
	r.Convergence = conv
}
