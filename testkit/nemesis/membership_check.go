package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// MembershipReport is what CheckMembership found.
type MembershipReport struct {
	Views         int // views delivered by the watchers (the final read not counted)
	Watches       int // Watch calls that delivered a view
	Registrations int // member registrations (MemberSpan)
	// Calls counts, per kind, the calls that returned nil; CallErrors those
	// that failed.
	Calls      map[string]int
	CallErrors map[string]int
	Faults     map[string]int // kind -> faults attempted
	// FaultsFailed counts by kind the attempts that failed or may not have
	// taken effect.
	FaultsFailed map[string]int
	// ShownAfterEnd is the longest a view showed a registration after its
	// member saw it lost (not left: a cut-off member stays visible until
	// its session or lease expires): within Lag + Grace, or a violation.
	ShownAfterEnd time.Duration
	// Convergence is the latest any watcher delivered the final view,
	// counted from the heal (0 if every watcher already showed it then;
	// -1 if some never did).
	Convergence time.Duration
	// Lag, Grace and Converge are the bounds checked: a view may show the
	// group as it was up to Lag before it was delivered; a registration
	// whose member saw it end (other than by a Leave that returned) may
	// stay on the server up to Grace after; every watcher shows the final
	// group within Converge of the heal.
	Lag, Grace, Converge time.Duration
	Violations           []string
	Where                []Span // Where[i] locates Violations[i] (nowhere if about no interval)
	capped               map[string]int
}

// maxPerCheck caps the violations reported by one check: past it they are
// counted in one last line.
const maxPerCheck = 20

func (r *MembershipReport) violateAt(where Span, format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	r.Where = append(r.Where, where)
}

// violateIn reports a violation of check, up to maxPerCheck of them.
func (r *MembershipReport) violateIn(check string, where Span, format string, args ...any) {
	r.capped[check]++
	if r.capped[check] <= maxPerCheck {
		r.violateAt(where, check+": "+format, args...)
	}
}

// memberIndex is a history's registrations and calls, indexed.
type memberIndex struct {
	h       *MembershipHistory
	bySince map[string][]*MemberSpan // id + "@" + since
	byID    map[string][]*MemberSpan
	calls   map[string][]*MemberCall // id -> its joins and leaves
	values  map[string]*MemberCall   // value -> the join or update that wrote it
	updates map[[2]int][]*MemberCall // (client, member) -> its updates that returned nil
	leaves  map[[2]int]*MemberCall   // (client, member) -> its Leave
}

func sinceKey(id string, since int64) string { return fmt.Sprintf("%s@%d", id, since) }

func indexMembership(h *MembershipHistory) *memberIndex {
	x := &memberIndex{h: h, bySince: map[string][]*MemberSpan{}, byID: map[string][]*MemberSpan{}, calls: map[string][]*MemberCall{},
		values: map[string]*MemberCall{}, updates: map[[2]int][]*MemberCall{}, leaves: map[[2]int]*MemberCall{}}
	for i := range h.Spans {
		s := &h.Spans[i]
		x.bySince[sinceKey(s.ID, s.Since)] = append(x.bySince[sinceKey(s.ID, s.Since)], s)
		x.byID[s.ID] = append(x.byID[s.ID], s)
	}
	for i := range h.Calls {
		c := &h.Calls[i]
		key := [2]int{c.Client, c.Member}
		switch c.Kind {
		case CallJoin, CallLeave:
			x.calls[c.ID] = append(x.calls[c.ID], c)
			if c.Kind == CallLeave {
				x.leaves[key] = c
			}
		case CallUpdate:
			if c.Err == "" {
				x.updates[key] = append(x.updates[key], c)
			}
		}
		if c.Value != "" {
			x.values[c.Value] = c
		}
	}
	return x
}

// end is s's end for the checks: its End, or the end of the run.
func (x *memberIndex) end(s *MemberSpan) time.Duration {
	if s.End < 0 {
		return x.h.End
	}
	return s.End
}

// The rules of CheckMembership, on the history of a membership run:
//
//   - each watcher's views, per Watch call, never go back in Rev; each
//     view lists each id once, sorted; two views of one Rev (any watcher,
//     the final read) show the same members;
//   - soundness: a view delivered at t shows a registration (id, Since)
//     only if one of id's registrations had that Since, asked for before
//     t, and not known gone before t − Lag (gone: Grace after its member
//     saw it end; Lag after its Leave returned); or a Join or Leave of id
//     was under way; its data is a value that Member wrote (Join or
//     Update called before t), not older than one an Update on that
//     registration returned more than Lag before t;
//   - completeness: a view delivered at t shows every registration its
//     member held without a break from t − Lag to t (and did not leave),
//     unless a revocation (session expiry, deleted directory or key,
//     revoked lease) may have removed it; such a registration's context
//     ends within Grace of the revocation;
//   - two registrations of one id with different Since are never live
//     at once;
//   - convergence: every watcher's last view equals the final read, and
//     was delivered within Converge of the heal; the final read shows
//     every member joined then.
//
// Lag = Grace = T + 1 s, Converge = ConvergeBound(T), T the session
// timeout.

// CheckMembership checks a membership history: the order of each watch's
// views, soundness, completeness and convergence (the rules are listed
// above), with Lag = Grace = T + 1 s and Converge = ConvergeBound(T), T the
// session timeout.
func CheckMembership(h *MembershipHistory) *MembershipReport {
	T := h.SessionTimeout
	r := &MembershipReport{Registrations: len(h.Spans), Calls: map[string]int{}, CallErrors: map[string]int{},
		Faults: map[string]int{}, FaultsFailed: map[string]int{}, Convergence: -1,
		Lag: T + time.Second, Grace: T + time.Second, Converge: ConvergeBound(T), capped: map[string]int{}}
	for _, c := range h.Calls {
		if c.Err == "" {
			r.Calls[c.Kind]++
		} else {
			r.CallErrors[c.Kind]++
		}
	}
	for _, f := range h.Faults {
		r.Faults[f.Kind]++
		if f.Err != "" {
			r.FaultsFailed[f.Kind]++
		}
	}
	x := indexMembership(h)
	r.checkOrder(h)
	views := slices.Clone(h.Views)
	if h.FinalErr == "" {
		views = append(views, h.Final)
	}
	for i := range views {
		v := &views[i]
		for _, m := range v.Members {
			r.checkSound(x, v, m)
		}
		r.checkComplete(x, v)
	}
	r.checkDuplicates(x)
	r.checkRevoked(x)
	r.checkConverged(x)
	for check, n := range r.capped {
		if n > maxPerCheck {
			r.violateAt(nowhere, "%s: %d more violations not listed", check, n-maxPerCheck)
		}
	}
	return r
}

// checkOrder checks each watcher's views: Rev never decreasing within a
// Watch, ids sorted and unique, one state per Rev.
func (r *MembershipReport) checkOrder(h *MembershipHistory) {
	last := map[[2]int]*ViewRec{}
	byRev := map[int64]*ViewRec{}
	all := slices.Clone(h.Views)
	if h.FinalErr == "" {
		all = append(all, h.Final)
	}
	for i := range all {
		v := &all[i]
		if v.Watcher >= 0 {
			r.Views++
			key := [2]int{v.Watcher, v.Watch}
			if p := last[key]; p == nil {
				r.Watches++
			} else if v.Rev < p.Rev {
				r.violateIn("rev order", Span{p.At, v.At}, "watcher %d (watch %d) delivered Rev %d at %v after Rev %d at %v", v.Watcher, v.Watch, v.Rev, v.At, p.Rev, p.At)
			}
			last[key] = v
		}
		for j := 1; j < len(v.Members); j++ {
			if v.Members[j].ID <= v.Members[j-1].ID {
				r.violateIn("view shape", Span{v.At, v.At}, "%s lists %s after %s (not sorted, or twice)", viewName(v), v.Members[j].ID, v.Members[j-1].ID)
			}
		}
		if p := byRev[v.Rev]; p == nil {
			byRev[v.Rev] = v
		} else if !sameMembers(p.Members, v.Members) {
			r.violateIn("one state per Rev", Span{min(p.At, v.At), max(p.At, v.At)}, "%s and %s both have Rev %d but show %s and %s",
				viewName(p), viewName(v), v.Rev, showMembers(p.Members), showMembers(v.Members))
		}
	}
}

// checkSound checks that member m of view v was a real state of the group
// when v was read (soundness), with data its member wrote.
func (r *MembershipReport) checkSound(x *memberIndex, v *ViewRec, m ViewMember) {
	t := v.At
	var match, late *MemberSpan
	var lateGone time.Duration
	why := ""
	for _, s := range x.bySince[sinceKey(m.ID, m.Since)] {
		if s.Asked > t {
			continue
		}
		if s.End >= 0 && t > s.End && s.Cause != recipe.ErrLeft.Error() {
			r.ShownAfterEnd = max(r.ShownAfterEnd, t-s.End)
		}
		gone, because := x.end(s)+r.Grace, fmt.Sprintf("%v after its member saw it end", r.Grace)
		if l := x.leaves[[2]int{s.Client, s.Member}]; l != nil && l.Err == "" && l.Return < gone {
			gone, because = l.Return, fmt.Sprintf("Leave, called at %v, returned nil", l.Call)
		}
		if s.End < 0 || t <= gone+r.Lag {
			match = s
			break
		}
		late, lateGone, why = s, gone, because
	}
	switch {
	case match != nil:
		r.checkData(x, v, m, match)
	case late != nil:
		r.violateIn("soundness", Span{lateGone, t}, "%s shows %s (Since %d) %v after it was gone at %v (%s; lag allowed %v) (%s)",
			viewName(v), m.ID, m.Since, t-lateGone, lateGone, why, r.Lag, x.describe(m.ID))
	case m.Since > v.Rev:
		r.violateIn("soundness", Span{t, t}, "%s (Rev %d) shows %s (Since %d), a registration made after the view's Rev (%s)",
			viewName(v), v.Rev, m.ID, m.Since, x.describe(m.ID))
	case !x.underWay(m.ID, m.Since, t, r.Lag, r.Grace):
		r.violateIn("soundness", Span{t, t}, "%s shows %s (Since %d), a registration no Join of it made by then (%s)",
			viewName(v), m.ID, m.Since, x.describe(m.ID))
	}
}

// underWay reports whether a Join or Leave of id was under way at t: from
// its call to Lag after its return (after the first registration of the
// Member a Join returned), or Grace + Lag after a failed one, whose node
// or key may go only with its session; or a Member of id was registering
// again (registeringAgain). A view may show a registration of id that no
// Listen reported only then (one made while Leave stopped the Member, one
// a failed Join or a re-registration made and removes).
func (x *memberIndex) underWay(id string, since int64, t, lag, grace time.Duration) bool {
	for _, c := range x.calls[id] {
		ret := c.Return + lag
		if c.Err != "" {
			ret += grace
		} else if c.Kind == CallJoin {
			for _, s := range x.byID[id] {
				if s.Client == c.Client && s.Member == c.Member {
					ret = max(ret, s.Start+lag)
					break
				}
			}
		}
		if c.Call <= t && t <= ret {
			return true
		}
	}
	return x.registeringAgain(id, since, t, lag, grace)
}

// registeringAgain reports whether a Member of id was making its
// registration again at t, by itself, with a Since above its last one: from
// the end of one (not by Leave) to Lag after the next began, or after its
// Leave returned plus Grace (a create whose reply was lost when Leave
// stopped it is removed by the cleanup, or with its session).
func (x *memberIndex) registeringAgain(id string, since int64, t, lag, grace time.Duration) bool {
	for _, s := range x.byID[id] {
		if s.End < 0 || s.End > t || s.Cause == recipe.ErrLeft.Error() || since <= s.Since {
			continue
		}
		until := x.h.End
		for _, n := range x.byID[id] {
			if n.Client == s.Client && n.Member == s.Member && n.Start > s.End {
				until = min(until, n.Start+lag)
			}
		}
		if l := x.leaves[[2]int{s.Client, s.Member}]; l != nil && l.Call >= s.End {
			until = min(until, l.Return+lag+grace)
		}
		if t <= until {
			return true
		}
	}
	return false
}

// checkData checks the data of m, shown by v as registration s: a value
// s's Member wrote, called before v, and not older than a value an Update
// on that registration returned more than Lag before v.
func (r *MembershipReport) checkData(x *memberIndex, v *ViewRec, m ViewMember, s *MemberSpan) {
	w := x.values[m.Data]
	if w == nil || w.Client != s.Client || w.Member != s.Member || w.Call > v.At {
		r.violateIn("data", Span{v.At, v.At}, "%s shows %s (Since %d) with data %q, which its Member (join %d of client %d) had not written by then",
			viewName(v), m.ID, m.Since, m.Data, s.Member, s.Client)
		return
	}
	for _, u := range x.updates[[2]int{s.Client, s.Member}] {
		if u.Seq > w.Seq && u.Return < v.At-r.Lag && u.Return >= s.Start && (s.End < 0 || u.Return <= s.End) {
			r.violateIn("data", Span{u.Return, v.At}, "%s shows %s (Since %d) with data %q, older than %q which an Update on that registration returned at %v",
				viewName(v), m.ID, m.Since, m.Data, u.Value, u.Return)
			return
		}
	}
}

// checkComplete checks that v shows every registration held without a
// break from v.At − Lag to v.At, unless a revocation may have removed it.
func (r *MembershipReport) checkComplete(x *memberIndex, v *ViewRec) {
	shown := map[string]bool{}
	for _, m := range v.Members {
		shown[sinceKey(m.ID, m.Since)] = true
	}
	for i := range x.h.Spans {
		s := &x.h.Spans[i]
		end := x.end(s)
		if l := x.leaves[[2]int{s.Client, s.Member}]; l != nil {
			end = min(end, l.Call)
		}
		if s.End < 0 {
			end = min(end, x.h.Stopped)
		}
		if s.Start > v.At-r.Lag || end < v.At || shown[sinceKey(s.ID, s.Since)] || revokedSpan(x.h.Faults, s, v.At) {
			continue
		}
		r.violateIn("completeness", Span{s.Start, v.At}, "%s lacks %s (Since %d), registered from %v to %v (%s): %s",
			viewName(v), s.ID, s.Since, s.Start, spanEnd(s), s.Cause, showMembers(v.Members))
	}
}

// revokedSpan reports whether a revocation begun by t may have removed
// registration s (its client's, or every client's; Since below Below).
func revokedSpan(faults []Fault, s *MemberSpan, t time.Duration) bool {
	for _, f := range faults {
		if f.Revokes && f.Start <= t && s.Asked <= f.End && (f.Client < 0 || f.Client == s.Client) && (f.Below == 0 || s.Since < int64(f.Below)) {
			return true
		}
	}
	return false
}

// checkRevoked checks that a registration a revocation certainly removed
// while it was live ended within Grace of the revocation's end.
func (r *MembershipReport) checkRevoked(x *memberIndex) {
	for _, f := range x.h.Faults {
		if !f.Certain {
			continue
		}
		for i := range x.h.Spans {
			s := &x.h.Spans[i]
			if s.Start > f.Start || (s.End >= 0 && s.End <= f.Start) || (f.Client >= 0 && f.Client != s.Client) || (f.Below != 0 && s.Since >= int64(f.Below)) {
				continue
			}
			if s.End < 0 || s.End > f.End+r.Grace {
				r.violateIn("revocation", Span{f.Start, x.end(s)}, "%s (Since %d) still registered %v after %s of %s ended at %v (ended %s)",
					s.ID, s.Since, r.Grace, f.Kind, f.Target, f.End, spanEnd(s))
			}
		}
	}
}

// checkDuplicates checks that no two registrations of one id with
// different Since were live at once.
func (r *MembershipReport) checkDuplicates(x *memberIndex) {
	for id, spans := range x.byID {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.Since != b.Since && a.Start < x.end(b) && b.Start < x.end(a) {
					r.violateIn("one registration per id", Span{max(a.Start, b.Start), min(x.end(a), x.end(b))},
						"%s registered twice at once: Since %d from %v to %s, Since %d from %v to %s", id, a.Since, a.Start, spanEnd(a), b.Since, b.Start, spanEnd(b))
				}
			}
		}
	}
}

// checkConverged checks that every watcher's last view is the final read,
// delivered within Converge of the heal, and that the final read shows
// every member joined then.
func (r *MembershipReport) checkConverged(x *memberIndex) {
	h := x.h
	if h.FinalErr != "" {
		r.violateAt(Span{h.Healed, h.Stopped}, "convergence: no final read of the group: %s", h.FinalErr)
		return
	}
	last := map[int]*ViewRec{}
	for i := range h.Views {
		last[h.Views[i].Watcher] = &h.Views[i]
	}
	conv := time.Duration(0)
	for w := range h.Clients {
		v := last[w]
		switch {
		case v == nil:
			r.violateAt(Span{0, h.Stopped}, "convergence: watcher %d delivered no view", w)
			conv = -1
		case !sameMembers(v.Members, h.Final.Members):
			r.violateAt(Span{h.Healed, h.Stopped}, "convergence: watcher %d's last view (at %v, Rev %d) %s is not the final read's (at %v, Rev %d) %s",
				w, v.At, v.Rev, showMembers(v.Members), h.Final.At, h.Final.Rev, showMembers(h.Final.Members))
			conv = -1
		case v.At > h.Healed+r.Converge:
			r.violateAt(Span{h.Healed, v.At}, "convergence: watcher %d showed the final group only %v after the heal (bound %v)", w, v.At-h.Healed, r.Converge)
		}
		if conv >= 0 && v != nil {
			conv = max(conv, v.At-h.Healed)
		}
	}
	r.Convergence = conv
	for id, calls := range x.calls {
		if c := calls[len(calls)-1]; c.Kind == CallJoin && c.Err == "" && !slices.ContainsFunc(h.Final.Members, func(m ViewMember) bool { return m.ID == id }) {
			r.violateAt(Span{h.Healed, h.Final.At}, "convergence: member %s, joined at %v and never left, is not in the final read (at %v): %s", id, c.Return, h.Final.At, showMembers(h.Final.Members))
		}
	}
}

// describe lists id's registrations, for a violation.
func (x *memberIndex) describe(id string) string {
	var parts []string
	for _, s := range x.byID[id] {
		parts = append(parts, fmt.Sprintf("Since %d asked %v registered %v to %s", s.Since, s.Asked, s.Start, spanEnd(s)))
	}
	if len(parts) > 6 {
		parts = append(parts[:3], append([]string{"..."}, parts[len(parts)-3:]...)...)
	}
	if len(parts) == 0 {
		return "no registration of it recorded"
	}
	return "its registrations: " + strings.Join(parts, "; ")
}
