package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Chart geometry, in pixels: two panels side by side (acquisitions/s,
// p99 acquire latency; for a waiters workload hand-offs/s and p99 hand-off
// latency), one bar per peer in each.
const (
	chartW  = 600 // room for the longest panel title
	labelW  = 62  // peer names, left of the first panel
	panelW  = 230 // each panel's bars and their values
	panelG  = 24  // between the panels
	barH    = 16
	barGap  = 6
	chartT  = 44 // title and panel headings
	chartB  = 18 // the note under the bars
	oursFil = "#2b6cb0"
	peerFil = "#a0aec0"
)

// writeCharts writes one chart per workload of the medians meds into dir,
// as <workload>.svg, in the order the workloads first appear. It returns
// the files written.
func writeCharts(dir string, meds []Result, rounds int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var order []string
	by := map[string][]Result{}
	for _, m := range meds {
		if by[m.Workload] == nil {
			order = append(order, m.Workload)
		}
		by[m.Workload] = append(by[m.Workload], m)
	}
	var files []string
	for _, wl := range order {
		f := filepath.Join(dir, wl+".svg")
		out, err := os.Create(f)
		if err != nil {
			return files, err
		}
		err = chart(out, wl, by[wl], rounds)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("writing %s: %w", f, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// chart writes the SVG chart of one workload: acquisitions/s and p99
// acquire latency of each peer in rs (for a waiters workload, what they
// measure there: hand-offs/s and p99 hand-off latency, docs/performance.md),
// side by side, ours highlighted; rounds is said under it (0: not known).
func chart(w io.Writer, workload string, rs []Result, rounds int) error {
	h := chartT + len(rs)*(barH+barGap) + chartB
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, sans-serif" font-size="12">`+"\n", chartW, h, chartW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="4" y="16" font-size="14" font-weight="600">%s</text>`+"\n", html.EscapeString(workload))
	rate, latency := "acquisitions/s", "p99 acquire latency, ms"
	if strings.HasPrefix(workload, "waiters") {
		rate, latency = "hand-offs/s", "p99 hand-off latency, ms"
	}
	panels := []struct {
		title string
		value func(Result) float64
		unit  string
	}{
		{rate + " (more is better)", func(r Result) float64 { return r.AcqPerS }, "%.0f"},
		{latency + " (less is better)", func(r Result) float64 { return r.P99us / 1000 }, "%.2f"},
	}
	for i, p := range panels {
		x0 := labelW + i*(panelW+panelG)
		top := 0.0
		for _, r := range rs {
			top = math.Max(top, p.value(r))
		}
		if top <= 0 {
			top = 1
		}
		scale := float64(panelW-48) / top // room for the value after the bar
		fmt.Fprintf(&b, `<text x="%d" y="36" fill="#4a5568">%s</text>`+"\n", x0, p.title)
		for j, r := range rs {
			y := chartT + j*(barH+barGap)
			fill := peerFil
			if r.Peer == "ours" {
				fill = oursFil
			}
			if i == 0 {
				fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, y+barH-4, html.EscapeString(r.Peer))
			}
			v := p.value(r)
			bw := math.Max(v*scale, 1)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: `+p.unit+`</title></rect>`+"\n",
				x0, y, bw, barH, fill, html.EscapeString(r.Peer), html.EscapeString(workload), v)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#2d3748">`+p.unit+`</text>`+"\n", float64(x0)+bw+4, y+barH-4, v)
		}
	}
	of := "medians"
	if rounds > 0 {
		of = fmt.Sprintf("medians of %d round(s)", rounds)
	}
	fmt.Fprintf(&b, `<text x="4" y="%d" fill="#718096" font-size="10">%s, zkbench</text>`+"\n", h-5, of)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// errNoMedians is matched (errors.Is) by readMedians' error for a file
// with no median line.
var errNoMedians = errors.New("no median lines (zkbench -json writes them after the rounds)")

// readMedians reads the median lines of a JSON lines file written by
// -json, and the number of rounds they are medians of (the highest round
// of its run lines, 0 if it has none).
func readMedians(r io.Reader) ([]Result, int, error) {
	var meds []Result
	rounds := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var res Result
		if err := dec.Decode(&res); err != nil {
			return nil, 0, fmt.Errorf("line %d: not a zkbench result: %w", n, err)
		}
		switch res.Type {
		case "median":
			if res.Peer == "" || res.Workload == "" {
				return nil, 0, fmt.Errorf("line %d: a median without peer or workload", n)
			}
			meds = append(meds, res)
		case "run":
			rounds = max(rounds, res.Round)
		default:
			return nil, 0, fmt.Errorf("line %d: type %q (want run or median)", n, res.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	if len(meds) == 0 {
		return nil, 0, errNoMedians
	}
	return meds, rounds, nil
}
