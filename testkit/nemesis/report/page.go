package report

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

type violation struct {
	Text string
	Href string // "#t=..." of its interval; "" when it has none
}

type count struct {
	Name string
	N    int
}

type writes struct {
	Register                         string
	Accepted, Stale, Unknown, Failed int
	FirstStale                       string // "#t=..." around the first write refused as stale; "" if none was
}

// firstStale is the interval of the earliest write to reg refused as stale.
func firstStale(h *nemesis.History, reg string) (nemesis.Span, bool) {
	s, ok := nemesis.Span{}, false
	for _, o := range h.Ops {
		if o.Kind == nemesis.OpWrite && o.Register == reg && o.Outcome == nemesis.Stale && (!ok || o.Call < s.From) {
			s, ok = nemesis.Span{From: o.Call, To: o.Return}, true
		}
	}
	return s, ok
}

// page is what page.tmpl draws: the figures of the run and its check at
// the top, then the timeline.
type page struct {
	H          *nemesis.History
	Rep        *nemesis.Report
	Pass       bool
	Length     string
	Healed     string
	Recovery   string
	ZK         bool   // a ZooKeeper run (its words in the legend)
	StallHref  string // the #t= of the longest stall, "" if none
	Writes     []writes
	Faults     []count
	Violations []violation
	Unlisted   int // violations beyond maxListed
	Views      []View

	Width, Height, Left float64
	PlotTop, PlotH      float64
	End, View, Whole    string
	Lanes               []lane
	Back, Front, Labels []item // drawn in that order
}

// millis formats d in milliseconds, as the page's data-a and data-b are.
func millis(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }

// secs formats d in seconds for people.
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s" }

// interval is the #t= fragment that shows s with at least 300 ms around it.
func interval(s nemesis.Span, end time.Duration) string { return around(s, 300*time.Millisecond, end) }

// around is the #t= fragment that shows s with at least pad around it.
func around(s nemesis.Span, pad, end time.Duration) string {
	pad = max(pad, (s.To-s.From)/2)
	from, to := max(0, s.From-pad), min(max(end, s.To), s.To+pad)
	return fmt.Sprintf("%.3f-%.3f", from.Seconds(), to.Seconds())
}

// build lays out the page of the run: the figures at the top, the lanes,
// the faults, leases and writes on them, the heal and the end, and the
// violations.
func build(h *nemesis.History, rep *nemesis.Report, views []View) *page {
	p := &page{H: h, Rep: rep, Pass: len(rep.Violations) == 0, Views: views, Left: left,
		Length: secs(h.End), Healed: secs(h.Healed), Recovery: "none", End: millis(h.End)}
	regs := nemesis.Registers(h)
	p.figures(h, rep, regs)
	lanesTop, lanesH := p.layOutLanes(h, regs)
	p.faults(h, lanesTop, lanesH)
	p.leases(h)
	p.writes(h, regs)
	p.Back = append(p.Back, item{Class: "mark", A: millis(h.Healed), B: millis(h.Healed), Y: axisH, H: p.Height - axisH,
		Title: fmt.Sprintf("every fault healed at %s", secs(h.Healed))},
		item{Class: "mark", A: millis(h.End), B: millis(h.End), Y: axisH, H: p.Height - axisH,
			Title: fmt.Sprintf("the run ended at %s", secs(h.End))})
	p.Labels = append(p.Labels, item{Class: "t mark heal", A: millis(h.Healed), Y: dirRow, Text: "heal"})
	p.violations(h, rep)
	return p
}

// figures sets the figures at the top of the page: the recovery, the
// writes to each register of regs (with a link to the first stale one),
// and the faults of each kind.
func (p *page) figures(h *nemesis.History, rep *nemesis.Report, regs []string) {
	if rep.Recovery >= 0 {
		p.Recovery = rep.Recovery.Round(time.Millisecond).String()
	}
	p.ZK = h.Backend == "" || h.Backend == "zk"
	if rep.Stall.Known() {
		p.StallHref = "#t=" + interval(rep.Stall, h.End)
	}
	for _, reg := range regs {
		m := rep.Writes[reg]
		w := writes{Register: reg, Accepted: m[nemesis.Accepted], Stale: m[nemesis.Stale], Unknown: m[nemesis.Unknown], Failed: m[nemesis.Failed]}
		if s, ok := firstStale(h, reg); ok {
			w.FirstStale = "#t=" + around(s, 600*time.Millisecond, h.End)
		}
		p.Writes = append(p.Writes, w)
	}
	for k, n := range rep.Faults {
		p.Faults = append(p.Faults, count{k, n})
	}
	slices.SortFunc(p.Faults, func(a, b count) int { return strings.Compare(a.Name, b.Name) })
}

// layOutLanes places the lanes: the ensemble's faults, then one per
// client, with a row per register of regs; it returns the top and the
// height of the client lanes.
func (p *page) layOutLanes(h *nemesis.History, regs []string) (lanesTop, lanesH float64) {
	p.PlotTop = axisH
	y := axisH + faultsH + gap
	for c := range h.Clients {
		l := lane{Label: fmt.Sprintf("client %d", c), Y: y, H: tokH + leaseH + 4 + regH*float64(len(regs))}
		for i, reg := range regs {
			l.Rows = append(l.Rows, row{reg, y + tokH + leaseH + 4 + regH*float64(i)})
		}
		p.Lanes = append(p.Lanes, l)
		y += l.H + gap
	}
	p.Height = y + 4
	p.PlotH = p.Height - p.PlotTop
	return axisH + faultsH, y - axisH - faultsH
}

// violations lists the violations at the top (the first maxListed) and
// marks them in red (overlapping ones as one band); the page opens at the
// earliest located one, else shows the whole run.
func (p *page) violations(h *nemesis.History, rep *nemesis.Report) {
	p.Whole = fmt.Sprintf("0-%.3f", h.End.Seconds()*1.01)
	p.View = p.Whole
	var located []int
	for i, v := range rep.Violations {
		pv := violation{Text: v}
		if i < len(rep.Where) && rep.Where[i].Known() {
			pv.Href = "#t=" + interval(rep.Where[i], h.End)
			located = append(located, i)
		}
		if i < maxListed {
			p.Violations = append(p.Violations, pv)
		}
	}
	p.Unlisted = len(rep.Violations) - len(p.Violations)
	slices.SortStableFunc(located, func(i, j int) int { return cmp.Compare(rep.Where[i].From, rep.Where[j].From) })
	first := -1
	if len(located) > 0 {
		first = located[0]
		// the first on its own, over the band of those it overlaps
		i := located[0]
		s := rep.Where[i]
		p.View = interval(s, h.End)
		p.Front = append(p.Front, item{Class: "viol first", A: millis(s.From), B: millis(s.To), Y: axisH, H: p.Height - axisH,
			Title: fmt.Sprintf("violation %d, the first: %s", i+1, rep.Violations[i])})
		p.Labels = append(p.Labels, item{Class: "t viol", A: millis(s.From), B: millis(s.To), Y: dirRow,
			Text: fmt.Sprintf("violation %d", i+1), Sticky: true})
	}
	for len(located) > 0 {
		// the violations whose intervals overlap the first one's, transitively
		band, n := rep.Where[located[0]], 1
		for n < len(located) && rep.Where[located[n]].From <= band.To {
			band.To = max(band.To, rep.Where[located[n]].To)
			n++
		}
		p.violationBand(band, located[:n], rep.Violations, first)
		located = located[n:]
	}
}

// maxListed bounds the violations listed at the top of the page (a broken
// recipe can have hundreds); every one is marked on the timeline.
const maxListed = 100

// violationBand marks the interval band, where the violations of indexes
// ids (at least one) are, across the timeline; first, marked on its own,
// needs no label of its band.
func (p *page) violationBand(band nemesis.Span, ids []int, texts []string, first int) {
	label := fmt.Sprintf("violation %d", ids[0]+1)
	if len(ids) > 1 {
		label = fmt.Sprintf("%d violations", len(ids))
	}
	var title []string
	for _, i := range ids[:min(len(ids), 5)] {
		title = append(title, fmt.Sprintf("violation %d: %s", i+1, texts[i]))
	}
	if len(ids) > 5 {
		title = append(title, fmt.Sprintf("and %d more", len(ids)-5))
	}
	a, b := millis(band.From), millis(band.To)
	p.Front = append(p.Front, item{Class: "viol", A: a, B: b, Y: axisH, H: p.Height - axisH, Title: strings.Join(title, "\n")})
	if len(ids) > 1 || ids[0] != first {
		p.Labels = append(p.Labels, item{Class: "t viol", A: a, B: b, Y: serverRow, Text: label, Sticky: true})
	}
}
