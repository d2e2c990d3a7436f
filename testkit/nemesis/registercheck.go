package nemesis

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckTimeout bounds the linearizability search per register; a search
// that does not finish in time is reported as a violation (not proven).
var CheckTimeout = 60 * time.Second

// CheckRegister checks the writes to one fenced register on their own (the
// part of Check that does not need grants or faults) and returns the
// violations: no accepted write with a token lower than the one it
// overwrote; no two accepted writes over the same state (lost update); when
// every accepted write carries its order of application (Seq > 0) and none
// is Unknown, each overwrote exactly the state left by the one before; and
// the history is linearizable (porcupine) for a register that applies a
// write iff its token is at least the stored one. end is when the history
// ends: an Unknown write may take effect until then. The tests of
// resource/fencesql check their concurrent runs with it.
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
