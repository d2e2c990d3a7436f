// Package report draws a nemesis run (package zktest/nemesis) as one
// self-contained HTML page: the check results at the top, then a timeline
// with one lane per client showing each lease from its grant to its end,
// coloured by how it ended (released, suspended, session lost, node
// deleted, session closed), the waits and failed attempts before it, the
// register writes as marks coloured by outcome with their tokens, and the
// faults as bands: a server fault or a deletion of the directory across
// every lane, a client fault across its client's lane. A run with a
// violation opens at the interval of the history the first violation is
// about, marked in red; every violation links to its interval.
//
// Nothing is fetched when the page is viewed: its SVG, style and script are
// inline. The SVG is rendered here with html/template; the script only
// places elements on the time axis for the interval shown (the wheel
// zooms, dragging pans, and #t=FROM-TO in seconds in the address names an
// interval). It sets data-ready="ok" on the html element once it has laid
// the page out, and data-error to the message of any script error, so that
// a headless browser can tell a page that works from a blank one.
//
// Write puts porcupine's own view of each register's history beside the
// page and links it.
package report

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
)

// Page is the file name of the timeline page Write writes.
const Page = "index.html"

// View is porcupine's view of one register's history, as the page links it.
type View struct {
	Register string
	File     string                // relative to the page
	Result   porcupine.CheckResult // porcupine's verdict: Ok, Illegal or Unknown (undecided in time)
}

// Write writes the page of the run with history h and report rep to dir
// (created if missing) as Page, and beside it porcupine's view of each
// register as porcupine-<register>.html, linked from the page. It returns
// the errors of creating or writing the files.
func Write(dir string, h *nemesis.History, rep *nemesis.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var views []View
	for _, reg := range nemesis.Registers(h) {
		v := View{Register: reg, File: "porcupine-" + reg + ".html"}
		err := writeFile(filepath.Join(dir, v.File), func(w io.Writer) (err error) {
			var b bytes.Buffer
			if v.Result, err = nemesis.VisualizeRegister(&b, h, reg); err != nil {
				return err
			}
			_, err = w.Write(backLink(b.Bytes(), h, reg))
			return err
		})
		if err != nil {
			return err
		}
		views = append(views, v)
	}
	return writeFile(filepath.Join(dir, Page), func(w io.Writer) error { return Render(w, h, rep, views) })
}

// backLink adds to porcupine's view of register reg a link back to the
// run's page, and says what the view shows and how its tokens are written.
// Porcupine's page has no place for it: it goes at the top right, fixed
// like porcupine's legend at the top left, right after the <body> tag (a
// view without one, from another version of porcupine, is left as it is;
// TestWrite would say so).
func backLink(view []byte, h *nemesis.History, reg string) []byte {
	what := fmt.Sprintf("nemesis %s, seed %d: register %s", h.Recipe, h.Seed, reg)
	nav := fmt.Sprintf(`<nav style="position: fixed; top: 10px; right: 10px; z-index: 1; font: 13px system-ui, sans-serif; `+
		`background: rgba(255, 255, 255, 0.85); padding: 4px 8px; border-radius: 4px; text-align: right">`+
		`<a href="%s">&larr; the run's page</a><br>porcupine's view of %s; tokens are written epoch:counter, 1:85 for 4294967381</nav>`,
		Page, template.HTMLEscapeString(what))
	view = bytes.Replace(view, []byte("<title>Porcupine</title>"), []byte("<title>porcupine: "+template.HTMLEscapeString(what)+"</title>"), 1)
	i := bytes.Index(view, []byte("<body>"))
	if i < 0 {
		return view
	}
	i += len("<body>")
	return slices.Concat(view[:i], []byte(nav), view[i:])
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// Render writes the page of the run with history h and report rep (from
// nemesis.Check or nemesis.Run) to w, linking the porcupine views given.
func Render(w io.Writer, h *nemesis.History, rep *nemesis.Report, views []View) error {
	if h == nil || rep == nil || h.Clients < 1 {
		return errors.New("report: no history, no report, or no client to draw")
	}
	return pageTmpl.Execute(w, build(h, rep, views))
}

//go:embed page.tmpl
var pageSrc string

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageJS string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"css": func() template.CSS { return template.CSS(pageCSS) },
	"js":  func() template.JS { return template.JS(pageJS) },
}).Parse(pageSrc))

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

type page struct {
	H          *nemesis.History
	Rep        *nemesis.Report
	Pass       bool
	Length     string
	Healed     string
	Recovery   string
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

func build(h *nemesis.History, rep *nemesis.Report, views []View) *page {
	p := &page{H: h, Rep: rep, Pass: len(rep.Violations) == 0, Views: views, Left: left,
		Length: secs(h.End), Healed: secs(h.Healed), Recovery: "none", End: millis(h.End)}
	if rep.Recovery >= 0 {
		p.Recovery = rep.Recovery.Round(time.Millisecond).String()
	}
	regs := nemesis.Registers(h)
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

	// Lanes: the ensemble's faults, then one per client.
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
	lanesTop, lanesH := axisH+faultsH, y-axisH-faultsH

	p.faults(h, lanesTop, lanesH)
	p.leases(h)
	p.writes(h, regs)
	p.Back = append(p.Back, item{Class: "mark", A: millis(h.Healed), B: millis(h.Healed), Y: axisH, H: p.Height - axisH,
		Title: fmt.Sprintf("every fault healed at %s", secs(h.Healed))},
		item{Class: "mark", A: millis(h.End), B: millis(h.End), Y: axisH, H: p.Height - axisH,
			Title: fmt.Sprintf("the run ended at %s", secs(h.End))})
	p.Labels = append(p.Labels, item{Class: "t mark heal", A: millis(h.Healed), Y: dirRow, Text: "heal"})

	// Violations: listed at the top (the first maxListed), marked in red
	// (overlapping ones as one band); the page opens at the earliest
	// located one, else shows the whole run.
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
	return p
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
