package nemesis

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// ValueReport is what CheckValue found.
type ValueReport struct {
	Gets    map[string]int // outcome -> Gets (the final read's included)
	Sets    map[string]int // outcome -> TrySets
	Stale   int            // TrySets with a wrong version on purpose
	Events  int            // states the watches delivered
	Watches int
	// FinalVersion is the final read's Version (-1 if none).
	FinalVersion int64
	Faults       map[string]int // kind -> faults attempted
	// FaultsFailed counts by kind the attempts that failed or may not have
	// taken effect.
	FaultsFailed map[string]int
	// Convergence is the latest any watcher delivered the final state,
	// counted from the heal (-1 if some never did); Converge is its bound.
	Convergence time.Duration
	Converge    time.Duration
	Violations  []string
	Where       []Span // Where[i] locates Violations[i] (nowhere if about no interval)
	capped      map[string]int
}

func (r *ValueReport) violateAt(where Span, format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	r.Where = append(r.Where, where)
}

// violateIn reports a violation of check, up to maxPerCheck of them (as
// MembershipReport's).
func (r *ValueReport) violateIn(check string, where Span, format string, args ...any) {
	r.capped[check]++
	if r.capped[check] <= maxPerCheck {
		r.violateAt(where, check+": "+format, args...)
	}
}

// valueSeen is one state a call or a watch showed, and which.
type valueSeen struct {
	s    ValueState
	what string
	at   Span
}

func opText(o *ValueOp) string {
	s := fmt.Sprintf("client %d's %s", o.Client, o.Kind)
	if o.Kind == ValueSet {
		s += fmt.Sprintf("(%d, %q)", o.Expected, o.Data)
	}
	s += fmt.Sprintf(" [%v, %v] -> %s", o.Call, o.Return, o.Outcome)
	if o.Outcome == ValueOK {
		s += " " + o.Got.String()
	}
	return s
}

// The rules of CheckValue, on the history of a values run on ZooKeeper
// (Version is the node's data version plus 1: a create makes 1, each
// write adds 1, nothing deletes the value), T the session timeout:
//
//   - shape: a state is absent iff its Version is 0 (and then its Data is
//     empty); an ok TrySet returns Version expected+1 with its own data;
//     only a TrySet conflicts;
//   - lost update: no two ok TrySets expected the same version;
//   - written states: every present state shown (by an ok call or a
//     watch) holds data that a TrySet not refused wrote, at the version
//     that TrySet makes (expected+1);
//   - one state per version: every state shown with a Version shows the
//     same Data and Rev (the write's zxid) as every other one of that
//     Version; Revs grow with Versions; an absent state's Rev is below the
//     create's;
//   - stale read: no ok Get shows a Version below one that an ok call
//     showed before the Get was called;
//   - linearizability (porcupine): the Gets and TrySets are those of a
//     compare-and-set register whose state is (Version, Data): a Get
//     returns the state; TrySet(expected, data) succeeds iff Version is
//     expected, making (expected+1, data); a conflict leaves a state of
//     another Version; an unknown TrySet may take effect (if the Version
//     is expected) or not, any time after its call; a Get that failed is
//     left out;
//   - watch order: each Watch channel's Revs and Versions never go back;
//   - convergence: after the heal, every client's watches deliver the
//     final read's state within ConvergeBound(T).

// CheckValue checks a values history by the rules listed above.
func CheckValue(h *ValueHistory) *ValueReport {
	r := &ValueReport{Gets: map[string]int{}, Sets: map[string]int{}, Faults: map[string]int{}, FaultsFailed: map[string]int{},
		FinalVersion: -1, Convergence: -1, Converge: ConvergeBound(h.SessionTimeout), capped: map[string]int{}}
	if h.FinalErr == "" {
		r.FinalVersion = h.Final.Version
	}
	for _, f := range h.Faults {
		r.Faults[f.Kind]++
		if f.Err != "" {
			r.FaultsFailed[f.Kind]++
		}
	}
	var seen []valueSeen
	byData := map[string]*ValueOp{}
	byExpected := map[int64]*ValueOp{}
	for i := range h.Ops {
		o := &h.Ops[i]
		where := Span{o.Call, o.Return}
		switch o.Kind {
		case ValueGet:
			r.Gets[o.Outcome]++
			if o.Outcome == ValueConflict {
				r.violateIn("shape", where, "%s: a Get conflicted", opText(o))
			}
		case ValueSet:
			r.Sets[o.Outcome]++
			if o.Stale {
				r.Stale++
			}
			if p := byData[o.Data]; p != nil {
				r.violateIn("shape", where, "%s and %s wrote the same data (the workload's data must be unique)", opText(p), opText(o))
			}
			byData[o.Data] = o
			if o.Outcome != ValueOK {
				break
			}
			if o.Got.Version != o.Expected+1 || o.Got.Data != o.Data || o.Got.Absent {
				r.violateIn("shape", where, "%s: an ok TrySet must return Version %d with its data", opText(o), o.Expected+1)
			}
			if p := byExpected[o.Expected]; p != nil {
				r.violateIn("lost update", Span{min(p.Call, o.Call), max(p.Return, o.Return)}, "%s and %s both succeeded over version %d", opText(p), opText(o), o.Expected)
			}
			byExpected[o.Expected] = o
		default:
			r.violateIn("shape", where, "%s: unknown kind", opText(o))
		}
		if o.Outcome == ValueOK {
			seen = append(seen, valueSeen{o.Got, opText(o), where})
		}
	}
	watches := map[[2]int]*ValueEvent{}
	for i := range h.Events {
		e := &h.Events[i]
		r.Events++
		key := [2]int{e.Client, e.Watch}
		what := fmt.Sprintf("client %d's watch %d at %v: %s", e.Client, e.Watch, e.At, e.State)
		if p, ok := watches[key]; !ok {
			r.Watches++
		} else if e.State.Rev < p.State.Rev || e.State.Version < p.State.Version {
			r.violateIn("watch order", Span{p.At, e.At}, "%s after %s (at %v)", what, p.State, p.At)
		}
		watches[key] = e
		seen = append(seen, valueSeen{e.State, what, Span{e.At, e.At}})
	}
	r.checkStates(seen, byData)
	r.checkStaleReads(h.Ops)
	r.checkLinearizable(h.Ops, h.End)
	r.checkConverged(h)
	for check, n := range r.capped {
		if n > maxPerCheck {
			r.violateAt(nowhere, "%s: %d more violations not listed", check, n-maxPerCheck)
		}
	}
	return r
}

// checkStates checks the states shown: shape, written, one per version,
// Revs in the order of Versions.
func (r *ValueReport) checkStates(seen []valueSeen, byData map[string]*ValueOp) {
	byVersion := map[int64]valueSeen{}
	var absent []valueSeen
	for _, v := range seen {
		s := v.s
		if s.Absent != (s.Version == 0) || s.Absent && s.Data != "" {
			r.violateIn("shape", v.at, "%s: absent %t with Version %d and data %q", v.what, s.Absent, s.Version, s.Data)
			continue
		}
		if s.Absent {
			absent = append(absent, v)
			continue
		}
		switch w := byData[s.Data]; {
		case w == nil:
			r.violateIn("written states", v.at, "%s: data %q was never written", v.what, s.Data)
		case w.Outcome == ValueConflict:
			r.violateIn("written states", v.at, "%s: data %q is that of a TrySet refused: %s", v.what, s.Data, opText(w))
		case w.Expected+1 != s.Version:
			r.violateIn("written states", v.at, "%s: data %q was written over version %d: %s", v.what, s.Data, w.Expected, opText(w))
		}
		if p, ok := byVersion[s.Version]; !ok {
			byVersion[s.Version] = v
		} else if p.s != s {
			r.violateIn("one state per version", Span{min(p.at.From, v.at.From), max(p.at.To, v.at.To)}, "%s, but %s", v.what, p.what)
		}
	}
	versions := slices.Sorted(maps.Keys(byVersion))
	for i := 1; i < len(versions); i++ {
		a, b := byVersion[versions[i-1]], byVersion[versions[i]]
		if a.s.Rev >= b.s.Rev {
			r.violateIn("one state per version", Span{min(a.at.From, b.at.From), max(a.at.To, b.at.To)}, "Revs not in the order of Versions: %s, but %s", a.what, b.what)
		}
	}
	if first, ok := byVersion[1]; ok {
		for _, v := range absent {
			if v.s.Rev >= first.s.Rev {
				r.violateIn("one state per version", Span{min(first.at.From, v.at.From), max(first.at.To, v.at.To)}, "%s, but the create is at Rev %d: %s", v.what, first.s.Rev, first.what)
			}
		}
	}
}

// checkStaleReads reports each ok Get that shows a Version below the
// highest an ok call showed before the Get was called.
func (r *ValueReport) checkStaleReads(ops []ValueOp) {
	var done []*ValueOp // ok ops, by Return
	for i := range ops {
		if ops[i].Outcome == ValueOK {
			done = append(done, &ops[i])
		}
	}
	slices.SortFunc(done, func(a, b *ValueOp) int { return cmp.Compare(a.Return, b.Return) })
	for i := range ops {
		g := &ops[i]
		if g.Kind != ValueGet || g.Outcome != ValueOK {
			continue
		}
		var newest *ValueOp
		for _, o := range done {
			if o.Return >= g.Call {
				break
			}
			if newest == nil || o.Got.Version > newest.Got.Version {
				newest = o
			}
		}
		if newest != nil && g.Got.Version < newest.Got.Version {
			r.violateIn("stale read", Span{newest.Call, g.Return}, "%s, called after %s had returned", opText(g), opText(newest))
		}
	}
}

// valueModelState is the porcupine model's state: (Version, Data);
// version 0 is absent (Data "").
type valueModelState struct {
	Version int64
	Data    string
}

type valueInput struct {
	Kind     string
	Expected int64
	Data     string
}

type valueOutput struct {
	Outcome string
	Got     valueModelState
}

var valueHashSeed = maphash.MakeSeed()

// valueModel is a compare-and-set register of ZooKeeper's versions (the
// rules of CheckValue).
var valueModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{valueModelState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(valueModelState), input.(valueInput), output.(valueOutput)
		next := valueModelState{s.Version + 1, in.Data}
		switch {
		case in.Kind == ValueGet:
			if out.Outcome == ValueOK && out.Got == s {
				return []any{s}
			}
		case out.Outcome == ValueOK:
			if s.Version == in.Expected && out.Got == next {
				return []any{next}
			}
		case out.Outcome == ValueConflict:
			if s.Version != in.Expected {
				return []any{s}
			}
		case out.Outcome == ValueUnknown:
			if s.Version == in.Expected {
				return []any{s, next}
			}
			return []any{s}
		}
		return nil
	},
	Hash: func(state any) uint64 { return maphash.Comparable(valueHashSeed, state.(valueModelState)) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(valueInput), output.(valueOutput)
		if in.Kind == ValueGet {
			return fmt.Sprintf("get() -> (%d,%q)", out.Got.Version, out.Got.Data)
		}
		if out.Outcome == ValueOK {
			return fmt.Sprintf("set(%d,%q) -> ok", in.Expected, in.Data)
		}
		return fmt.Sprintf("set(%d,%q) -> %s", in.Expected, in.Data, out.Outcome)
	},
	DescribeState: func(state any) string {
		s := state.(valueModelState)
		return fmt.Sprintf("(%d,%q)", s.Version, s.Data)
	},
}

// valuePorcupineOps is the ops as porcupine operations: a failed Get, which
// tells nothing, is left out; an unknown TrySet may take effect any time
// after its call (returns after end).
func valuePorcupineOps(ops []ValueOp, end time.Duration) []porcupine.Operation {
	var hist []porcupine.Operation
	for _, o := range ops {
		if o.Kind == ValueGet && o.Outcome != ValueOK {
			continue
		}
		ret := int64(o.Return)
		if o.Outcome == ValueUnknown {
			ret = int64(max(end, o.Return)) + 1
		}
		out := valueOutput{Outcome: o.Outcome}
		if o.Outcome == ValueOK {
			out.Got = valueModelState{o.Got.Version, o.Got.Data}
		}
		hist = append(hist, porcupine.Operation{ClientId: o.Client, Input: valueInput{o.Kind, o.Expected, o.Data},
			Call: int64(o.Call), Output: out, Return: ret})
	}
	return hist
}

func (r *ValueReport) checkLinearizable(ops []ValueOp, end time.Duration) {
	hist := valuePorcupineOps(ops, end)
	if len(hist) == 0 {
		return
	}
	switch res := porcupine.CheckOperationsTimeout(valueModel.ToModel(), hist, CheckTimeout); res {
	case porcupine.Ok:
	case porcupine.Illegal:
		_, info := porcupine.CheckOperationsVerbose(valueModel.ToModel(), hist, CheckTimeout)
		where := unplaceable(hist, info)
		r.violateIn("linearizability", where, "the history of %d calls is not linearizable (the first call that could not be placed: %v to %v)", len(hist), where.From, where.To)
	default:
		r.violateIn("linearizability", nowhere, "not decided within %v (%d calls)", CheckTimeout, len(hist))
	}
}

// checkConverged checks that each client's watches last delivered the
// final state, within Converge of the heal.
func (r *ValueReport) checkConverged(h *ValueHistory) {
	if h.FinalErr != "" {
		r.violateAt(Span{h.Healed, h.End}, "convergence: no final read of the value: %s", h.FinalErr)
		return
	}
	conv := time.Duration(0)
	for i := range h.Clients {
		switch {
		case i >= len(h.Last) || i >= len(h.LastAt) || h.LastAt[i] < 0:
			r.violateAt(Span{h.Healed, h.End}, "convergence: client %d's watches delivered nothing", i)
			conv = -1
		case h.Last[i] != h.Final:
			r.violateAt(Span{h.Healed, h.End}, "convergence: client %d's watches last delivered %s (at %v), not the final read's %s", i, h.Last[i], h.LastAt[i], h.Final)
			conv = -1
		default:
			d := max(h.LastAt[i]-h.Healed, 0)
			if d > r.Converge {
				r.violateAt(Span{h.Healed, h.LastAt[i]}, "convergence: client %d's watches delivered the final state only %v after the heal (bound %v)", i, d, r.Converge)
			}
			if conv >= 0 {
				conv = max(conv, d)
			}
		}
	}
	r.Convergence = conv
}

// VisualizeValue writes porcupine's own visualization of h's Gets and
// TrySets to w (as VisualizeRegister does for a register), with the run's
// faults as annotations, and returns porcupine's verdict.
func VisualizeValue(w io.Writer, h *ValueHistory) (porcupine.CheckResult, error) {
	hist := valuePorcupineOps(h.Ops, h.End)
	res, info := porcupine.CheckOperationsVerbose(valueModel.ToModel(), hist, CheckTimeout)
	var notes []porcupine.Annotation
	for _, f := range h.Faults {
		d := fmt.Sprintf("%s %s", f.Kind, f.Target)
		if f.Err != "" {
			d += ": " + f.Err
		}
		tag := "faults of the ensemble"
		if f.Client >= 0 {
			tag = fmt.Sprintf("faults of client %d", f.Client)
		}
		notes = append(notes, porcupine.Annotation{Tag: tag, Start: int64(f.Start), End: int64(f.End),
			Description: f.Kind, Details: d, BackgroundColor: "#f4c7c3"})
	}
	info.AddAnnotations(notes)
	return res, porcupine.Visualize(valueModel.ToModel(), info, w)
}
