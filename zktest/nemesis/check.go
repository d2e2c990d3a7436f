package nemesis

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
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
	Recovery    time.Duration // first grant after the heal, counted from the heal (-1: none)
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

// CheckTimeout bounds the linearizability search per register; a search
// that does not finish in time is reported as a violation (not proven).
var CheckTimeout = 60 * time.Second

// Check verifies the history h of a recipe whose live grants must satisfy
// allowed. See the package documentation for the invariants.
func Check(h *History, allowed Allowed) *Report {
	r := &Report{Writes: map[string]map[Outcome]int{}, Faults: map[string]int{}, Recovery: -1, Grants: len(h.Grants)}
	for _, f := range h.Faults {
		r.Faults[f.Kind]++
		if f.Err != "" {
			r.FaultErrors++
		}
	}
	grants := make(map[int]*Grant, len(h.Grants))
	for i := range h.Grants {
		grants[h.Grants[i].ID] = &h.Grants[i]
	}
	byReg := map[string][]Op{}
	for _, o := range h.Ops {
		if o.Kind == OpWrite {
			if r.Writes[o.Register] == nil {
				r.Writes[o.Register] = map[Outcome]int{}
			}
			r.Writes[o.Register][o.Outcome]++
			byReg[o.Register] = append(byReg[o.Register], o)
		}
	}

	for reg, ops := range byReg {
		checkRegister(r, reg, ops, h.End)
	}

	// At every sample the live lease contexts are a set the recipe allows,
	// once those a forced revocation had removed are left out (revokedAt).
	bound := h.SessionTimeout + time.Second
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

	// A lease whose node a forced revocation removed ends within the bound
	// of the revocation's end, however it ends (its holder may release it
	// before it hears of the removal).
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

	// Recovery after the heal.
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
	return r
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

// CheckRegister checks the writes to one fenced register on their own (the
// part of Check that does not need grants or faults) and returns the
// violations: no accepted write with a token lower than the one it
// overwrote; no two accepted writes over the same state (lost update); when
// every accepted write carries its order of application (Seq > 0) and none
// is Unknown, each overwrote exactly the state left by the one before; and
// the history is linearizable (porcupine) for a register that applies a
// write iff its token is at least the stored one. end is when the history
// ends: an Unknown write may take effect until then. The tests of
// fence/fencesql check their concurrent runs with it.
func CheckRegister(reg string, ops []Op, end time.Duration) []string {
	r := &Report{}
	checkRegister(r, reg, ops, end)
	return r.Violations
}

func checkRegister(r *Report, reg string, ops []Op, end time.Duration) {
	over := map[State]Op{}
	ordered := true
	for _, o := range ops {
		if o.Outcome == Unknown {
			ordered = false
		}
		if o.Outcome != Accepted {
			continue
		}
		ordered = ordered && o.Seq > 0
		if o.Token < o.Prev.Token {
			r.violateAt(span(o), "register %s: a write with token %s was applied over token %s: %v", reg, TokenText(o.Token), TokenText(o.Prev.Token), o)
		}
		if p, dup := over[o.Prev]; dup {
			r.violateAt(span(p, o), "register %s: two accepted writes overwrote the same state (lost update): %v and %v", reg, p, o)
		}
		over[o.Prev] = o
	}
	if ordered {
		checkOrder(r, reg, ops)
	}
	checkLinearizable(r, reg, ops, end)
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
// Removed means: for a fault with a zxid, the grant's token (its node's
// czxid) is below it (a holder that released first ended its context
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
	case !f.Revokes, f.Kind == FaultExpire && f.Client != g.Client:
		return false
	case f.Zxid != 0:
		return g.Token < f.Zxid
	default:
		return g.Asked <= f.End
	}
}

// certainlyRemoved reports whether the completed forced revocation f
// removed g's node (or its holder released it first): g's token is below
// f's zxid or, when that is unknown, g was granted before f began.
func certainlyRemoved(f Fault, g *Grant) bool {
	switch {
	case !f.Certain, f.Kind == FaultExpire && f.Client != g.Client:
		return false
	case f.Zxid != 0:
		return g.Token < f.Zxid
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

// checkOrder replays a register's accepted writes in the order they were
// applied (Seq): each must overwrite exactly the state left by the previous.
func checkOrder(r *Report, reg string, ops []Op) {
	var acc []Op
	for _, o := range ops {
		if o.Outcome == Accepted {
			acc = append(acc, o)
		}
	}
	sort.Slice(acc, func(i, j int) bool { return acc[i].Seq < acc[j].Seq })
	var cur State
	for _, o := range acc {
		if o.Prev != cur {
			r.violateAt(span(o), "register %s: write #%d overwrote (%s,%q), but the register held (%s,%q): %v", reg, o.Seq, TokenText(o.Prev.Token), o.Prev.Value, TokenText(cur.Token), cur.Value, o)
		}
		cur = State{o.Token, o.Value}
	}
}

// regInput and regOutput are a write's porcupine input and output.
type regInput struct {
	State // what is written
}

type regOutput struct {
	Outcome Outcome
	Prev    State
}

// registerModel is a fenced register: a write is applied iff its token is
// at least the stored one. An accepted write names the state it overwrote;
// a stale one saw a higher token; an unknown one may or may not have been
// applied.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{State{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(State), input.(regInput), output.(regOutput)
		switch out.Outcome {
		case Accepted:
			if s == out.Prev && in.Token >= s.Token {
				return []any{in.State}
			}
		case Stale:
			if in.Token < s.Token {
				return []any{s}
			}
		case Unknown:
			if in.Token >= s.Token {
				return []any{s, in.State}
			}
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if out.Outcome != Accepted {
			return fmt.Sprintf("write(%s,%q) -> %s", ShortToken(in.Token), in.Value, out.Outcome)
		}
		return fmt.Sprintf("write(%s,%q) -> %s over (%s,%q)", ShortToken(in.Token), in.Value, out.Outcome, ShortToken(out.Prev.Token), out.Prev.Value)
	},
	DescribeState: func(state any) string {
		s := state.(State)
		return fmt.Sprintf("(%s,%q)", ShortToken(s.Token), s.Value)
	},
}

// porcupineOps is a register's writes as porcupine operations: a failed
// write, certainly not applied, has no effect to explain and is left out;
// an unknown one may take effect any time after its call.
func porcupineOps(writes []Op, end time.Duration) []porcupine.Operation {
	var hist []porcupine.Operation
	for _, o := range writes {
		if o.Outcome == Failed {
			continue
		}
		ret := int64(o.Return)
		if o.Outcome == Unknown {
			ret = int64(max(end, o.Return)) + 1
		}
		hist = append(hist, porcupine.Operation{ClientId: o.Client, Input: regInput{State{o.Token, o.Value}},
			Call: int64(o.Call), Output: regOutput{o.Outcome, o.Prev}, Return: ret})
	}
	return hist
}

func checkLinearizable(r *Report, reg string, ops []Op, end time.Duration) {
	hist := porcupineOps(ops, end)
	if len(hist) == 0 {
		return
	}
	switch res := porcupine.CheckOperationsTimeout(registerModel.ToModel(), hist, CheckTimeout); res {
	case porcupine.Ok:
	case porcupine.Illegal:
		_, info := porcupine.CheckOperationsVerbose(registerModel.ToModel(), hist, CheckTimeout)
		r.violateAt(unplaceable(hist, info), "register %s: the history of %d writes is not linearizable", reg, len(hist))
	default:
		r.violate("register %s: linearizability not decided within %v (%d writes)", reg, CheckTimeout, len(hist))
	}
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
	for _, reg := range []string{RegGuard, RegZnode, RegSQL} {
		if m := r.Writes[reg]; m != nil {
			ws = append(ws, fmt.Sprintf("%s: %d accepted, %d stale, %d unknown, %d failed", reg, m[Accepted], m[Stale], m[Unknown], m[Failed]))
		}
	}
	rec := "none"
	if r.Recovery >= 0 {
		rec = r.Recovery.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("grants %d; writes %s; samples %d (excused %d); faults %s (%d failed); recovery %s; violations %d",
		r.Grants, strings.Join(ws, "; "), r.Samples, r.Excused, strings.Join(fs, " "), r.FaultErrors, rec, len(r.Violations))
}
