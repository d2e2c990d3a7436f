package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// stall is the longest stretch of h with no grant while some client was
// asking for one (Report.Stall): the asking intervals are each grant's
// Asked to Granted and each failed attempt's Call to Return; within their
// union, the grants cut it into stretches. A figure of availability, not
// a check: a backend that grants at once after the heal (the recovery)
// may still have granted almost nothing while its servers were faulted.
// {-1, -1} when no client ever asked.
func stall(h *History) Span {
	var asking []Span
	var grants []time.Duration
	for _, g := range h.Grants {
		asking = append(asking, Span{g.Asked, g.Granted})
		grants = append(grants, g.Granted)
	}
	for _, o := range h.Ops {
		if o.Kind == OpAcquire {
			asking = append(asking, Span{o.Call, o.Return})
		}
	}
	if len(asking) == 0 {
		return nowhere
	}
	slices.SortFunc(asking, func(a, b Span) int { return compareDur(a.From, b.From) })
	slices.Sort(grants)
	best := Span{asking[0].From, asking[0].From}
	longest := func(s Span) { // s is a stretch of asking: cut it at the grants inside
		from := s.From
		i, _ := slices.BinarySearch(grants, s.From)
		for ; i < len(grants) && grants[i] <= s.To; i++ {
			if grants[i]-from > best.To-best.From {
				best = Span{from, grants[i]}
			}
			from = grants[i]
		}
		if s.To-from > best.To-best.From {
			best = Span{from, s.To}
		}
	}
	cur := asking[0]
	for _, a := range asking[1:] {
		if a.From > cur.To {
			longest(cur)
			cur = a
			continue
		}
		cur.To = max(cur.To, a.To)
	}
	longest(cur)
	return best
}

func compareDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// countFaults counts h's faults by kind in r.Faults and r.FaultsFailed
// (those with an error), and their total failures in r.FaultErrors.
func (r *Report) countFaults(h *History) {
	r.FaultsFailed = map[string]int{}
	for _, f := range h.Faults {
		r.Faults[f.Kind]++
		if f.Err != "" {
			r.FaultErrors++
			r.FaultsFailed[f.Kind]++
		}
	}
}

// Ineffective lists, in order, the fault kinds the run tried whose every
// attempt failed or may not have taken effect: kinds the run did not
// really test (a server it could not kill, say). Not a violation of the
// recipe, but a run that reads as a pass without them would mislead: the
// summary says it, cmd/nemesis exits 1 for a kind no run of a backend
// could inject, and the backends' short runs fail on it.
func (r *Report) Ineffective() []string {
	var out []string
	for k, n := range r.Faults {
		if n > 0 && r.FaultsFailed[k] >= n {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ineffectiveText is "kill-server: 1 tried, 1 failed; ..." for the kinds
// of Ineffective, or "".
func (r *Report) ineffectiveText() string {
	var parts []string
	for _, k := range r.Ineffective() {
		parts = append(parts, fmt.Sprintf("%s: %d tried, %d failed", k, r.Faults[k], r.FaultsFailed[k]))
	}
	return strings.Join(parts, "; ")
}

// StallText is Stall for people: "2.41s (from 10.203s to 12.613s)", or
// "none" when no client asked.
func (r *Report) StallText() string {
	if !r.Stall.Known() {
		return "none"
	}
	return fmt.Sprintf("%v (from %v to %v)", (r.Stall.To - r.Stall.From).Round(time.Millisecond),
		r.Stall.From.Round(time.Millisecond), r.Stall.To.Round(time.Millisecond))
}
