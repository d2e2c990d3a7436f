package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// Layout of the timeline, in pixels.
const (
	left    = 104.0 // the lanes' labels
	axisH   = 24.0  // the time axis
	faultsH = 32.0  // the lane of the ensemble's faults: servers above, the directory below
	tokH    = 10.0  // the row of the lease tokens, above the bars
	leaseH  = 12.0  // a lease bar
	regH    = 10.0  // a row of register writes
	gap     = 11.0  // between lanes: the labels of a client's faults, under its lane
	// The rows of labels in the faults lane (baselines): the server faults'
	// and the violation bands' above, the directory's, the heal and the
	// first violation below. The page's script shows, in a row, no label
	// over another.
	serverRow = axisH + 12
	dirRow    = axisH + 27
)

// item is one element of the timeline: a rect spanning A to B, or, with B
// empty, a text at A (both in milliseconds since the start of the run).
type item struct {
	Class  string
	A, B   string
	Y, H   float64
	Title  string
	Text   string
	Sticky bool // a text kept at the left edge while its interval is in view
}

type lane struct {
	Label string
	Y, H  float64
	Rows  []row // one row per register
}

type row struct {
	Label string
	Y     float64
}

// faults draws each fault in the ensemble's lane and as a band across every
// client lane (a server fault, a deletion of the directory), or as a band
// across its client's lane.
func (p *page) faults(h *nemesis.History, lanesTop, lanesH float64) {
	for _, f := range h.Faults {
		title := fmt.Sprintf("%s %s: %s to %s", f.Kind, f.Target, secs(f.Start), secs(f.End))
		if f.Err != "" {
			title += " (" + f.Err + ")"
		}
		a, b := millis(f.Start), millis(f.End)
		if f.Client >= 0 && f.Client < len(p.Lanes) {
			l := p.Lanes[f.Client]
			// the band covers the lane and the strip under it, where its label is
			p.Back = append(p.Back, item{Class: "band " + f.Kind, A: a, B: b, Y: l.Y - 1, H: l.H + gap - 1, Title: title})
			p.Labels = append(p.Labels, item{Class: "t mid fl", A: a, B: b, Y: l.Y + l.H + gap - 3, Text: f.Kind, Sticky: true})
			continue
		}
		p.Back = append(p.Back, item{Class: "band " + f.Kind, A: a, B: b, Y: lanesTop, H: lanesH, Title: title})
		y, row, label := axisH+2, serverRow, f.Kind+" "+strings.TrimPrefix(f.Target, "server ")
		if f.Kind == nemesis.FaultDeleteDir {
			y, row, label = axisH+faultsH/2+1, dirRow, f.Kind
		}
		p.Back = append(p.Back, item{Class: "fault " + f.Kind, A: a, B: b, Y: y, H: faultsH/2 - 3, Title: title})
		p.Labels = append(p.Labels, item{Class: "t mid fl", A: a, B: b, Y: row, Text: label, Sticky: true})
	}
}

// leases draws each grant from its grant to its end, after a thin line for
// the wait since it was asked for, and each failed attempt as a thin line.
func (p *page) leases(h *nemesis.History) {
	for _, g := range h.Grants {
		if g.Client < 0 || g.Client >= len(p.Lanes) {
			continue
		}
		l := p.Lanes[g.Client]
		end, how := g.Ended, Ending(g.Cause)
		if end < 0 {
			end = h.End
		}
		bar := l.Y + tokH
		p.Front = append(p.Front, item{Class: "wait", A: millis(g.Asked), B: millis(g.Granted), Y: bar + leaseH/2 - 1, H: 2,
			Title: fmt.Sprintf("client %d waited %s for grant %d", g.Client, (g.Granted - g.Asked).Round(time.Millisecond), g.ID)})
		p.Front = append(p.Front, item{Class: "lease " + how, A: millis(g.Granted), B: millis(end), Y: bar, H: leaseH,
			Title: fmt.Sprintf("grant %d, client %d, %s, token %s: granted %s, ended %s (%s)", g.ID, g.Client, g.Role, nemesis.TokenText(g.Token), secs(g.Granted), secs(end), endText(g))})
		p.Labels = append(p.Labels, item{Class: "t mid tok", A: millis(g.Granted), Y: bar - 2, Text: nemesis.ShortToken(g.Token)})
	}
	for _, o := range h.Ops {
		if o.Kind != nemesis.OpAcquire || o.Client < 0 || o.Client >= len(p.Lanes) {
			continue
		}
		l := p.Lanes[o.Client]
		p.Front = append(p.Front, item{Class: "afail", A: millis(o.Call), B: millis(o.Return), Y: l.Y + tokH + leaseH/2 - 1, H: 2, Title: o.String()})
	}
}

// writes draws each register write as a mark, in its register's row of its
// client's lane, from its call to its return.
func (p *page) writes(h *nemesis.History, regs []string) {
	for _, o := range h.Ops {
		i := slices.Index(regs, o.Register)
		if o.Kind != nemesis.OpWrite || i < 0 || o.Client < 0 || o.Client >= len(p.Lanes) {
			continue
		}
		y := p.Lanes[o.Client].Rows[i].Y
		p.Front = append(p.Front, item{Class: "w " + string(o.Outcome), A: millis(o.Call), B: millis(o.Return), Y: y, H: regH - 2, Title: o.String()})
		zoom := "near" // accepted writes carry their lease's token, shown on its bar
		if o.Outcome != nemesis.Accepted {
			zoom = "mid"
		}
		p.Labels = append(p.Labels, item{Class: "t " + zoom + " wt " + string(o.Outcome), A: millis(o.Return), Y: y + regH - 2, Text: nemesis.ShortToken(o.Token)})
	}
}

// Ending classifies how a lease ended from its context's cause (a Grant's
// Cause): "released", "suspended", "session-lost", "node-deleted",
// "session-closed", "live" (it had not ended when the run did) or "other".
// The page colours leases by it.
func Ending(cause string) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{recipe.ErrReleased, "released"}, {recipe.ErrSuspended, "suspended"}, {recipe.ErrSessionLost, "session-lost"},
		{recipe.ErrNodeDeleted, "node-deleted"}, {recipe.ErrSessionClosed, "session-closed"},
	} {
		if strings.Contains(cause, c.err.Error()) {
			return c.name
		}
	}
	if cause == "" {
		return "live"
	}
	return "other"
}

func endText(g nemesis.Grant) string {
	if g.Cause == "" {
		return "still live when the run ended"
	}
	return g.Cause
}
