package nemesis

import (
	"fmt"
	"slices"
	"time"
)

// Margins are the two numbers of a backend as a run observed them: for
// every exclusive lease (a holder's, a writer's, a leader's) whose
// context ended before its holder gave it up, the margin is the time from
// that end to the next grant to another client (its Granted minus the
// lease's Ended). Positive: the holder's context ended first, as the
// client's ownership deadline must end before the server's bound lets
// anyone else in. A negative margin is a violation. A lease a forced
// revocation may have removed (its node or key removed behind its
// holder's back before the next grant, the lease ending within the bound)
// is excused and not measured, whatever its margin: the revocation, not
// the two numbers, decided when the next client got in.
type Margins struct {
	Count            int // margins measured (excused ones left out)
	Min, Median, Max time.Duration
	Excused          int // lost leases a revocation may have removed, not measured
	// Values are the margins measured, in increasing order (the
	// command adds up the distribution of many runs from them).
	Values []time.Duration
}

// String is "12 measured: min 310ms, median 650ms, max 1.2s (2 excused)",
// or "none measured".
func (m Margins) String() string {
	s := "none measured"
	if m.Count > 0 {
		s = fmt.Sprintf("%d measured: min %v, median %v, max %v", m.Count,
			m.Min.Round(time.Millisecond), m.Median.Round(time.Millisecond), m.Max.Round(time.Millisecond))
	}
	if m.Excused > 0 {
		s += fmt.Sprintf(" (%d excused by a revocation)", m.Excused)
	}
	return s
}

// exclusive reports whether a grant of role excludes every other client.
func exclusive(r Role) bool { return r == RoleHolder || r == RoleWriter || r == RoleLeader }

// checkMargins measures the margins of h's lost exclusive leases that no
// revocation excuses into r.Margins and reports each negative one.
func (r *Report) checkMargins(h *History, bound time.Duration) {
	byGrant := slices.Clone(h.Grants)
	slices.SortStableFunc(byGrant, func(a, b Grant) int { return int(a.Granted - b.Granted) })
	var ms []time.Duration
	for _, g := range h.Grants {
		if !g.Lost || !exclusive(g.Role) {
			continue
		}
		i, _ := slices.BinarySearchFunc(byGrant, g.Granted, func(x Grant, t time.Duration) int { return int(x.Granted - t) })
		var next *Grant
		for j := i; j < len(byGrant); j++ {
			if byGrant[j].Client != g.Client && byGrant[j].Granted >= g.Granted && byGrant[j].ID != g.ID {
				next = &byGrant[j]
				break
			}
		}
		if next == nil {
			continue
		}
		m := next.Granted - g.Ended
		if excusedLoss(h, &g, next, bound) {
			r.Margins.Excused++
			continue
		}
		ms = append(ms, m)
		if m < 0 {
			r.violateAt(Span{next.Granted, g.Ended}, "grant %d (client %d, token %s) ended %v after grant %d (client %d, token %s) let another client in: negative margin %v (cause %q)",
				g.ID, g.Client, TokenText(g.Token), g.Ended-next.Granted, next.ID, next.Client, TokenText(next.Token), m, g.Cause)
		}
	}
	if len(ms) == 0 {
		return
	}
	slices.Sort(ms)
	r.Margins.Count, r.Margins.Min, r.Margins.Median, r.Margins.Max = len(ms), ms[0], ms[len(ms)/2], ms[len(ms)-1]
	r.Margins.Values = ms
}

// excusedLoss reports whether a forced revocation may have removed g while
// it was live and before next was granted, with g ending within the bound
// after it.
func excusedLoss(h *History, g, next *Grant, bound time.Duration) bool {
	for _, f := range h.Faults {
		if f.Start <= min(g.Ended, next.Granted) && g.Ended <= f.End+bound && mayHaveRemoved(f, g) {
			return true
		}
	}
	return false
}
