// Package report draws a nemesis run (package testkit/nemesis) as one
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
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/anishathalye/porcupine"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
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
