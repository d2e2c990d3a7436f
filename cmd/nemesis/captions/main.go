// Command captions writes the captions of the pictures scripts/pictures.sh
// takes (docs/img/nemesis-*.png) from the runs they show, so that a picture
// and the figures said of it always come from the same run: the seeded
// mutex run's figures, the write refused as stale that the zoomed picture
// shows and the faults in view, and the broken recipe's first violation.
// It reads each run's history.json (and checks it again, as
// `cmd/nemesis -render` does) and prints the markdown block, or with
// -update FILE replaces the block between the begin and end markers in
// FILE (docs/reliability.md).
//
// Usage (scripts/pictures.sh runs it):
//
//	go run ./cmd/nemesis/captions -run DIR -broken DIR -fault-phase 90s -broken-phase 3s \
//	    [-zookeeper 3.8.0] [-stale '#t=1.494-2.718' -stale-register znode] [-update docs/reliability.md]
package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/report"
)

// The markers of the generated block in the file -update rewrites.
const (
	Begin = "<!-- pictures: begin (written by `make pictures UPDATE_DOCS=1` with the pictures; edits here are lost) -->"
	End   = "<!-- pictures: end -->"
)

func main() {
	var in Inputs
	flag.StringVar(&in.RunDir, "run", "", "the seeded run's directory (history.json, index.html)")
	flag.StringVar(&in.BrokenDir, "broken", "", "the broken recipe's run directory")
	flag.DurationVar(&in.FaultPhase, "fault-phase", 0, "the seeded run's fault phase (-run of cmd/nemesis)")
	flag.DurationVar(&in.BrokenPhase, "broken-phase", 0, "the broken recipe's fault phase")
	flag.StringVar(&in.ZooKeeper, "zookeeper", "", "the servers' version, as cmd/nemesis printed it")
	flag.StringVar(&in.Stale, "stale", "", "the #t=FROM-TO of the zoomed picture (none: no such picture)")
	flag.StringVar(&in.StaleRegister, "stale-register", "", "the register whose first stale write the zoomed picture shows")
	update := flag.String("update", "", "replace the block between the markers in this file instead of printing it")
	flag.Parse()
	if in.RunDir == "" || in.BrokenDir == "" || in.FaultPhase <= 0 || in.BrokenPhase <= 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "captions: -run, -broken, -fault-phase and -broken-phase are needed (flags only)")
		flag.Usage()
		os.Exit(2)
	}
	block, err := in.Block()
	if err == nil && *update != "" {
		err = replaceBlock(*update, block)
	} else if err == nil {
		fmt.Print(block)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "captions:", err)
		os.Exit(1)
	}
}

// Inputs is what the captions are written from.
type Inputs struct {
	RunDir, BrokenDir       string
	FaultPhase, BrokenPhase time.Duration
	ZooKeeper               string
	Stale, StaleRegister    string
	run, broken             *nemesis.History
	runReport, brokenReport *nemesis.Report
	staleFrom, staleTo      float64
}

// recipes are the recipes the pictures show, by name.
var recipes = map[string]nemesis.Recipe{"mutex": nemesis.Mutex(), "broken-mutex": nemesis.Broken()}

// load reads and checks the history in dir.
func load(dir string) (*nemesis.History, *nemesis.Report, error) {
	f, err := os.Open(filepath.Join(dir, "history.json"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	h, err := nemesis.ReadHistory(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	r, ok := recipes[h.Recipe]
	if !ok {
		return nil, nil, fmt.Errorf("%s: recipe %q, not one the pictures show", f.Name(), h.Recipe)
	}
	return h, nemesis.Check(h, r.Allowed), nil
}

// Block is the markdown between the markers: the captions and the
// pictures, in the order of the page.
func (in *Inputs) Block() (string, error) {
	var err error
	if in.run, in.runReport, err = load(in.RunDir); err != nil {
		return "", err
	}
	if in.broken, in.brokenReport, err = load(in.BrokenDir); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(Begin + "\n")
	para(&b, in.runCaption())
	fmt.Fprintf(&b, "![The page of a %s %s run: %d client lanes of leases and writes under bands of faults](img/nemesis-run.png)\n\n",
		dur(in.FaultPhase), in.run.Recipe, in.run.Clients)
	if in.Stale != "" {
		c, err := in.staleCaption()
		if err != nil {
			return "", err
		}
		para(&b, c)
		fmt.Fprintf(&b, "![Zoomed at %s to %s s: the first write refused as stale, in red](img/nemesis-stale.png)\n\n",
			num(in.staleFrom), num(in.staleTo))
	}
	c, err := in.violationCaption()
	if err != nil {
		return "", err
	}
	para(&b, c)
	b.WriteString("![The broken recipe's page, opened at its first violation](img/nemesis-violation.png)\n")
	b.WriteString(End + "\n")
	return b.String(), nil
}

func (in *Inputs) runCaption() string {
	h, r := in.run, in.runReport
	zk := ""
	if in.ZooKeeper != "" {
		zk = ", ZooKeeper " + in.ZooKeeper
	}
	accepted := 0
	for _, m := range r.Writes {
		accepted += m[nemesis.Accepted]
	}
	verdict := "no violation"
	if n := len(r.Violations); n > 0 {
		verdict = plural(n, "violation")
	}
	recovery := "no grant after the heal"
	switch {
	case r.Recovery >= time.Millisecond:
		recovery = fmt.Sprintf("first grant %s after the heal", dur(r.Recovery.Round(time.Millisecond)))
	case r.Recovery >= 0:
		recovery = "first grant less than 1 ms after the heal"
	}
	return fmt.Sprintf("The pictures below and their figures come from one `make pictures UPDATE_DOCS=1`. "+
		"A %s run with %s of faults (seed %d, %d clients%s): %s, %s over %s, %s refused as stale, %s (%s), %s, %s. The whole run:",
		h.Recipe, dur(in.FaultPhase), h.Seed, h.Clients, zk, plural(r.Grants, "grant"), plural(accepted, "accepted write"), plural(len(r.Writes), "register"),
		plural(r.StaleRejected(), "write"), plural(len(h.Faults), "fault"), faultKinds(r.Faults), verdict, recovery)
}

// fragment matches the #t=FROM-TO of a page's address, in seconds.
var fragment = regexp.MustCompile(`^#t=(\d+(?:\.\d*)?)-(\d+(?:\.\d*)?)$`)

func (in *Inputs) staleCaption() (string, error) {
	m := fragment.FindStringSubmatch(in.Stale)
	if m == nil {
		return "", fmt.Errorf("-stale %q: not #t=FROM-TO", in.Stale)
	}
	in.staleFrom, _ = strconv.ParseFloat(m[1], 64)
	in.staleTo, _ = strconv.ParseFloat(m[2], 64)
	h, reg := in.run, in.StaleRegister
	o, ok := firstStale(h, reg)
	if !ok {
		return "", fmt.Errorf("the run has no write to register %q refused as stale", reg)
	}
	g := grantOf(h, o.Grant)
	s := fmt.Sprintf("The same page at its first write to the %s register refused as stale (the link on \"%d stale, refused\"), "+
		"zoomed at %s to %s s: client %d writes with token %s (its grant %d, which %s) at %s s",
		reg, in.runReport.Writes[reg][nemesis.Stale], num(in.staleFrom), num(in.staleTo),
		o.Client, nemesis.ShortToken(o.Token), g.ID, ending(g), secs(o.Call))
	if w, ok := fencedBy(h, o); ok {
		s += fmt.Sprintf(", after client %d's write with %s was accepted at %s s, and is refused (red)", w.Client, nemesis.ShortToken(w.Token), secs(w.Return))
	} else {
		s += ", and is refused (red)"
	}
	if fs := faultsIn(h, in.staleFrom, in.staleTo); len(fs) > 0 {
		s += "; faults in view: " + strings.Join(fs, ", ")
	}
	return s + ":", nil
}

func (in *Inputs) violationCaption() (string, error) {
	h, r := in.broken, in.brokenReport
	first := -1
	for i, w := range r.Where {
		if w.Known() && (first < 0 || w.From < r.Where[first].From) {
			first = i
		}
	}
	if first < 0 {
		return "", errors.New("the broken recipe's run has no located violation: its page opens at the whole run")
	}
	s := fmt.Sprintf("And the page of the broken recipe (a semaphore of two permits posing as a mutex, %s of faults, seed %d), as it opens: "+
		"at the first of its %s, outlined in red from %s to %s s, ",
		dur(in.BrokenPhase), h.Seed, plural(len(r.Violations), "violation"), secs(r.Where[first].From), secs(r.Where[first].To))
	gs := violationGrants(h, r.Violations[first])
	if len(gs) < 2 {
		return s + fmt.Sprintf("`%s`:", r.Violations[first]), nil
	}
	slices.SortFunc(gs, func(a, b nemesis.Grant) int { return cmp.Compare(a.Granted, b.Granted) })
	last := gs[len(gs)-1]
	var held []string
	for _, g := range gs[:len(gs)-1] {
		held = append(held, fmt.Sprintf("client %d still held %s (granted at %s s)", g.Client, nemesis.ShortToken(g.Token), secs(g.Granted)))
	}
	s += fmt.Sprintf("client %d was granted token %s at %s s while %s", last.Client, nemesis.ShortToken(last.Token), secs(last.Granted), strings.Join(held, " and "))
	// The fence: once the highest token has a write accepted by a
	// register, that register refuses the other holders' writes.
	hi := slices.MaxFunc(gs, func(a, b nemesis.Grant) int { return cmp.Compare(a.Token, b.Token) })
	since := map[string]time.Duration{} // register -> hi's first accepted write there
	for _, o := range h.Ops {
		if t, ok := since[o.Register]; o.Kind == nemesis.OpWrite && o.Grant == hi.ID && o.Outcome == nemesis.Accepted && (!ok || o.Return < t) {
			since[o.Register] = o.Return
		}
	}
	refused, all := 0, 0
	var others []string
	for _, g := range gs {
		if g.ID == hi.ID {
			continue
		}
		others = append(others, nemesis.ShortToken(g.Token))
		for _, o := range h.Ops {
			if t, ok := since[o.Register]; ok && o.Kind == nemesis.OpWrite && o.Grant == g.ID && o.Call >= t {
				all++
				if o.Outcome == nemesis.Stale {
					refused++
				}
			}
		}
	}
	if all == 0 {
		return s + ":", nil
	}
	s += fmt.Sprintf(". Once a register has accepted a write of the higher token, %s, it refuses ", nemesis.ShortToken(hi.Token))
	if refused == all {
		return s + fmt.Sprintf("every later write of %s (red; %s): the fence holds where the lock does not:", strings.Join(others, " and "), plural(all, "write")), nil
	}
	return s + fmt.Sprintf("%d of the %s of %s made after it (red):", refused, plural(all, "write"), strings.Join(others, " and ")), nil
}

// grantRef matches a grant in a violation of leases live at once (the
// checker's describe).
var grantRef = regexp.MustCompile(`grant (\d+): client \d+ `)

// violationGrants are the grants violation v names as live at once.
func violationGrants(h *nemesis.History, v string) []nemesis.Grant {
	var gs []nemesis.Grant
	for _, m := range grantRef.FindAllStringSubmatch(v, -1) {
		id, _ := strconv.Atoi(m[1])
		if g := grantOf(h, id); g.ID == id && !slices.ContainsFunc(gs, func(x nemesis.Grant) bool { return x.ID == id }) {
			gs = append(gs, g)
		}
	}
	return gs
}

func grantOf(h *nemesis.History, id int) nemesis.Grant {
	for _, g := range h.Grants {
		if g.ID == id {
			return g
		}
	}
	return nemesis.Grant{ID: -1}
}

// firstStale is the earliest write to reg refused as stale (as the page's
// link on the count of stale writes shows it).
func firstStale(h *nemesis.History, reg string) (nemesis.Op, bool) {
	var first nemesis.Op
	ok := false
	for _, o := range h.Ops {
		if o.Kind == nemesis.OpWrite && o.Register == reg && o.Outcome == nemesis.Stale && (!ok || o.Call < first.Call) {
			first, ok = o, true
		}
	}
	return first, ok
}

// fencedBy is the first write accepted on o's register with a higher token
// than o's, called before o returned: the one that fenced o's token out.
func fencedBy(h *nemesis.History, o nemesis.Op) (nemesis.Op, bool) {
	var w nemesis.Op
	ok := false
	for _, a := range h.Ops {
		if a.Kind == nemesis.OpWrite && a.Register == o.Register && a.Outcome == nemesis.Accepted && a.Token > o.Token &&
			a.Call < o.Return && (!ok || a.Return < w.Return) {
			w, ok = a, true
		}
	}
	return w, ok
}

// faultsIn lists the faults that overlap from to to (seconds), in the
// order they began, at most 6.
func faultsIn(h *nemesis.History, from, to float64) []string {
	var out []string
	fs := slices.Clone(h.Faults)
	slices.SortStableFunc(fs, func(a, b nemesis.Fault) int { return cmp.Compare(a.Start, b.Start) })
	for _, f := range fs {
		if f.End.Seconds() < from || f.Start.Seconds() > to {
			continue
		}
		if len(out) == 6 {
			return append(out, "more")
		}
		what := f.Kind + " " + strings.TrimPrefix(f.Target, "server ")
		if f.Kind == nemesis.FaultDeleteDir {
			what = f.Kind
		}
		if f.Client >= 0 {
			what = fmt.Sprintf("%s of client %d", f.Kind, f.Client)
		}
		out = append(out, fmt.Sprintf("%s (%s to %s s)", what, secs(f.Start), secs(f.End)))
	}
	return out
}

func ending(g nemesis.Grant) string {
	e := report.Ending(g.Cause)
	switch e {
	case "live":
		return "live at the end of the run"
	case "other":
		return "ended: " + g.Cause
	}
	return "ended as " + strings.ReplaceAll(e, "-", " ")
}

func faultKinds(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for i, k := range ks {
		ks[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(ks, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// dur writes d for people: "90 s", "24 ms".
func dur(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%d ms", d/time.Millisecond)
	}
	return d.String()
}

// secs writes d in seconds, to the millisecond.
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

func num(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

// para writes s as a paragraph wrapped at 74 columns.
func para(b *strings.Builder, s string) {
	col := 0
	for _, w := range strings.Fields(s) {
		if col > 0 && col+1+len(w) > 74 {
			b.WriteString("\n")
			col = 0
		} else if col > 0 {
			b.WriteString(" ")
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	b.WriteString("\n\n")
}

// replaceBlock replaces, in file, the lines from Begin to End with block
// (which has them).
func replaceBlock(file, block string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(Begin)), bytes.Index(b, []byte(End))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no block between %q and %q", file, Begin, End)
	}
	j += len(End)
	if j < len(b) && b[j] == '\n' {
		j++
	}
	out := slices.Concat(b[:i], []byte(block), b[j:])
	return os.WriteFile(file, out, 0o644)
}
