package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Allowed says whether a set of live grants' roles is one a recipe allows at
// any instant.
type Allowed func(live []Role) bool

// AtMost allows up to n live grants of any role (a mutex: 1; an election:
// 1; a semaphore of n permits: n).
func AtMost(n int) Allowed { return func(live []Role) bool { return len(live) <= n } }

// ReadersOrOneWriter allows any number of readers, or one writer alone.
func ReadersOrOneWriter(live []Role) bool {
	w := 0
	for _, r := range live {
		if r == RoleWriter {
			w++
		}
	}
	return w == 0 || (w == 1 && len(live) == 1)
}

// Report is what Check found.
type Report struct {
	Grants  int
	Writes  map[string]map[Outcome]int // register -> outcome -> count
	Samples int                        // live-set samples checked
	Excused int                        // samples over the limit only because of a forced revocation
	// ExcusedExamples describes the first few excused samples.
	ExcusedExamples []string
	Faults          map[string]int // kind -> faults attempted
	// FaultErrors counts the attempts that failed or may not have taken
	// effect (a kill-leader while there was no leader, an expiry of a
	// session that was already gone, a restart that timed out).
	FaultErrors int
	// FaultsFailed counts those attempts by kind; a kind whose every
	// attempt failed is one the run did not test (Ineffective).
	FaultsFailed map[string]int
	Recovery     time.Duration // first grant after the heal, counted from the heal (-1: none)
	// Stall is the longest stretch with no grant while some client was
	// asking for one (nowhere, From = To = -1, if none asked): availability
	// under the faults, beside the recovery after the heal. A figure, not a
	// check.
	Stall Span
	// Margins are the two numbers as the run observed them (Margins).
	Margins Margins
	// Violations lists every broken invariant; a correct run has none.
	Violations []string
	// Where locates Violations[i] in the run: the interval of the history
	// it is about (the overlap of the leases live at once, the writes, the
	// revocation and the lease it did not end, the wait after the heal, the
	// first write no linearization could place). Where[i].Known() is false
	// for a violation about no interval (a leak found after the run).
	Where []Span
}

// Span is an interval of a run, in time since its start.
type Span struct{ From, To time.Duration }

// nowhere is the Span of a violation about no interval.
var nowhere = Span{-1, -1}

// Known reports whether s locates something (nowhere does not).
func (s Span) Known() bool { return s.From >= 0 && s.To >= s.From }

// StaleRejected is the number of writes refused for a stale token, over
// every register.
func (r *Report) StaleRejected() int {
	n := 0
	for _, m := range r.Writes {
		n += m[Stale]
	}
	return n
}

// Operations is the number of grants and register writes.
func (r *Report) Operations() int {
	n := r.Grants
	for _, m := range r.Writes {
		for _, c := range m {
			n += c
		}
	}
	return n
}

func (r *Report) violate(format string, args ...any) { r.violateAt(nowhere, format, args...) }

func (r *Report) violateAt(where Span, format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	r.Where = append(r.Where, where)
}

// span is the interval of ops.
func span(ops ...Op) Span {
	s := Span{ops[0].Call, ops[0].Return}
	for _, o := range ops[1:] {
		s.From, s.To = min(s.From, o.Call), max(s.To, o.Return)
	}
	return s
}

// Check verifies the history h of a recipe whose live grants must satisfy
// allowed. See the package documentation for the invariants.
func Check(h *History, allowed Allowed) *Report {
	r := &Report{Writes: map[string]map[Outcome]int{}, Faults: map[string]int{}, Recovery: -1, Grants: len(h.Grants), Stall: stall(h)}
	r.countFaults(h)
	for reg, ops := range r.countWrites(h.Ops) {
		checkRegister(r, reg, ops, h.End)
	}
	grants := make(map[int]*Grant, len(h.Grants))
	for i := range h.Grants {
		grants[h.Grants[i].ID] = &h.Grants[i]
	}
	bound := h.SessionTimeout + time.Second // how long a revoked lease may seem live; the recovery's limit
	r.checkSamples(h, grants, allowed, bound)
	r.checkRevoked(h, bound)
	r.checkRecovery(h, bound)
	r.checkMargins(h, bound)
	return r
}

// countWrites counts the writes of ops in r.Writes and returns them by
// register.
func (r *Report) countWrites(ops []Op) map[string][]Op {
	byReg := map[string][]Op{}
	for _, o := range ops {
		if o.Kind == OpWrite {
			if r.Writes[o.Register] == nil {
				r.Writes[o.Register] = map[Outcome]int{}
			}
			r.Writes[o.Register][o.Outcome]++
			byReg[o.Register] = append(byReg[o.Register], o)
		}
	}
	return byReg
}

// checkSamples checks that at every sample the live lease contexts are a
// set the recipe allows, once those a forced revocation had removed are
// left out (revokedAt).
func (r *Report) checkSamples(h *History, grants map[int]*Grant, allowed Allowed, bound time.Duration) {
	for _, o := range h.Ops {
		if len(o.Live) == 0 {
			continue
		}
		r.Samples++
		if allowed(roles(grants, o.Live)) {
			continue
		}
		var kept []int
		for _, id := range o.Live {
			if g := grants[id]; g == nil || !revokedAt(h, g, o, bound) {
				kept = append(kept, id)
			}
		}
		if allowed(roles(grants, kept)) {
			r.Excused++
			if len(r.ExcusedExamples) < 5 {
				r.ExcusedExamples = append(r.ExcusedExamples, fmt.Sprintf("%v: %s", o, describe(grants, o.Live)))
			}
			continue
		}
		r.violateAt(overlap(grants, kept, o, h.End), "%d lease contexts live at once (%s), which %s does not allow: %v", len(o.Live), describe(grants, o.Live), h.Recipe, o)
	}
}

// checkRevoked checks that a lease whose node a forced revocation removed
// ends within the bound of the revocation's end, however it ends (its
// holder may release it before it hears of the removal).
func (r *Report) checkRevoked(h *History, bound time.Duration) {
	for _, f := range h.Faults {
		for i := range h.Grants {
			g := &h.Grants[i]
			if !certainlyRemoved(f, g) || (g.Ended >= 0 && g.Ended <= f.Start) {
				continue // not certainly hit, or already over
			}
			if g.Ended < 0 || g.Ended > f.End+bound {
				where := Span{f.Start, g.Ended}
				if g.Ended < 0 {
					where.To = h.End
				}
				r.violateAt(where, "grant %d (client %d, token %s) was still live %v after %s of %s ended at %v (ended %v, cause %q)",
					g.ID, g.Client, TokenText(g.Token), bound, f.Kind, f.Target, f.End, g.Ended, g.Cause)
			}
		}
	}
}

// checkRecovery checks that some client was granted within the bound of
// the heal, and sets r.Recovery.
func (r *Report) checkRecovery(h *History, bound time.Duration) {
	if h.FirstGrantAfterHeal >= 0 {
		r.Recovery = h.FirstGrantAfterHeal - h.Healed
	}
	if r.Recovery < 0 || r.Recovery > bound {
		where := Span{h.Healed, h.FirstGrantAfterHeal}
		if where.To < 0 {
			where.To = h.End
		}
		r.violateAt(where, "no grant within %v of the heal at %v (first grant after it: %v)", bound, h.Healed, h.FirstGrantAfterHeal)
	}
}

// overlap is the interval during which the leases ids, seen live together
// in sample o, were all live: from the latest of their grants to the
// earliest of their ends (the end of the run for a lease that did not
// end), or to the sample if that is later (a holder records its end just
// before it releases, so a sample can still see it live after it). A
// sample is read between o.Call and o.Return, after every grant it shows.
func overlap(grants map[int]*Grant, ids []int, o Op, end time.Duration) Span {
	s, first := Span{o.Call, o.Return}, true
	for _, id := range ids {
		g := grants[id]
		if g == nil {
			continue
		}
		ended := g.Ended
		if ended < 0 {
			ended = end
		}
		if first {
			s, first = Span{g.Granted, ended}, false
		}
		s.From, s.To = max(s.From, g.Granted), min(s.To, ended)
	}
	return Span{s.From, max(s.To, o.Return)}
}

// revokedAt reports whether g no longer counts in sample o, because a
// forced revocation may have removed its node before o was read.
//
// A forced revocation (an expiry on demand, a deletion of the directory)
// removes lease nodes behind their holders' backs. A holder hears of it
// only when its node's watch fires or its connection closes; until then it
// goes on, and may even release the lease (so how a lease ended tells
// nothing), while another client is rightly granted. So a lease whose node
// was removed no longer counts in a sample that may follow the removal
// (the fault began before the sample's return: when within the fault the
// node went is not known), up to the bound after the fault (session
// timeout + 1 s): by then its context must be done (checked on its own),
// and a sample that still shows it beside another lease is a violation.
//
// Removed means (only the grants of f.Client when f.Client >= 0): for a
// fault with Below, the grant's token is below it (ZooKeeper: its node's
// czxid below the revoking transaction's zxid) (a holder that released first ended its context
// before its delete, so no later sample shows it); for a fault of
// uncertain effect, the grant was asked for before the fault ended.
func revokedAt(h *History, g *Grant, o Op, bound time.Duration) bool {
	for _, f := range h.Faults {
		if f.Start <= o.Return && o.Call <= f.End+bound && mayHaveRemoved(f, g) {
			return true
		}
	}
	return false
}

// mayHaveRemoved reports whether the forced revocation f removed g's node,
// or may have for a fault of uncertain effect.
func mayHaveRemoved(f Fault, g *Grant) bool {
	switch {
	case !f.Revokes, f.Client >= 0 && f.Client != g.Client:
		return false
	case f.Below != 0:
		return g.Token < f.Below
	default:
		return g.Asked <= f.End
	}
}

// certainlyRemoved reports whether the completed forced revocation f
// removed g's node or key (or its holder released it first): g is f's
// client's when f.Client >= 0, and g's token is below f.Below or, when that
// is unknown, g was granted before f began.
func certainlyRemoved(f Fault, g *Grant) bool {
	switch {
	case !f.Certain, f.Client >= 0 && f.Client != g.Client:
		return false
	case f.Below != 0:
		return g.Token < f.Below
	default:
		return g.Granted < f.Start
	}
}

func roles(grants map[int]*Grant, ids []int) []Role {
	out := make([]Role, 0, len(ids))
	for _, id := range ids {
		if g := grants[id]; g != nil {
			out = append(out, g.Role)
		} else {
			out = append(out, RoleHolder)
		}
	}
	return out
}

func describe(grants map[int]*Grant, ids []int) string {
	var parts []string
	for _, id := range ids {
		g := grants[id]
		if g == nil {
			parts = append(parts, fmt.Sprintf("grant %d (unknown)", id))
			continue
		}
		parts = append(parts, fmt.Sprintf("grant %d: client %d %s token %s granted %v ended %v (%s)", g.ID, g.Client, g.Role, TokenText(g.Token), g.Granted, g.Ended, g.Cause))
	}
	return strings.Join(parts, "; ")
}

// Summary is one line of figures.
func (r *Report) Summary() string {
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var fs []string
	for _, k := range kinds {
		fs = append(fs, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	var ws []string
	regs := make([]string, 0, len(r.Writes))
	for reg := range r.Writes {
		regs = append(regs, reg)
	}
	slices.SortFunc(regs, registerOrder)
	for _, reg := range regs {
		if m := r.Writes[reg]; m != nil {
			ws = append(ws, fmt.Sprintf("%s: %d accepted, %d stale, %d unknown, %d failed", reg, m[Accepted], m[Stale], m[Unknown], m[Failed]))
		}
	}
	if len(ws) == 0 {
		ws = []string{"none"}
	}
	if len(fs) == 0 {
		fs = []string{"none"}
	}
	rec := "none"
	if r.Recovery >= 0 {
		rec = r.Recovery.Round(time.Millisecond).String()
	}
	s := fmt.Sprintf("grants %d; writes %s; samples %d (excused %d); faults %s (%d failed)",
		r.Grants, strings.Join(ws, "; "), r.Samples, r.Excused, strings.Join(fs, " "), r.FaultErrors)
	if in := r.ineffectiveText(); in != "" {
		s += "; NEVER TOOK EFFECT (not tested): " + in
	}
	return s + fmt.Sprintf("; longest stall %s; recovery %s; margins %s; violations %d",
		r.StallText(), rec, r.Margins, len(r.Violations))
}
