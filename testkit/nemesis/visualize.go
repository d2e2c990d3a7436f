package nemesis

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Registers lists the registers h has writes to: guard and znode first (in
// that order), then any other in name order.
func Registers(h *History) []string {
	seen := map[string]bool{}
	for _, o := range h.Ops {
		if o.Kind == OpWrite {
			seen[o.Register] = true
		}
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.SortFunc(out, registerOrder)
	return out
}

// registerOrder orders registers: guard, znode, then the others by name
// (sql among them).
func registerOrder(a, b string) int {
	rank := func(r string) int {
		switch r {
		case RegGuard:
			return 0
		case RegZnode:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}

// writesTo is h's writes to register reg, in recorded order.
func writesTo(h *History, reg string) []Op {
	var ops []Op
	for _, o := range h.Ops {
		if o.Kind == OpWrite && o.Register == reg {
			ops = append(ops, o)
		}
	}
	return ops
}

// VisualizeRegister writes porcupine's own visualization of register reg's
// writes in h to w: one HTML page with its script and data inline, showing
// the linearization porcupine found (or, for a history that is not
// linearizable, its longest partial linearizations and where they fail),
// with the run's faults and each client's leases as annotations. It returns
// porcupine's verdict (Ok, Illegal, or Unknown when the search did not end
// within CheckTimeout) and any error writing to w.
func VisualizeRegister(w io.Writer, h *History, reg string) (porcupine.CheckResult, error) {
	hist := porcupineOps(writesTo(h, reg), h.End)
	res, info := porcupine.CheckOperationsVerbose(registerModel.ToModel(), hist, CheckTimeout)
	var notes []porcupine.Annotation
	for _, f := range h.Faults {
		d := fmt.Sprintf("%s %s", f.Kind, f.Target)
		if f.Err != "" {
			d += ": " + f.Err
		}
		tag := "faults of the ensemble"
		if f.Client >= 0 {
			tag = fmt.Sprintf("faults of client %d", f.Client)
		}
		notes = append(notes, porcupine.Annotation{Tag: tag, Start: int64(f.Start), End: int64(f.End),
			Description: f.Kind, Details: d, BackgroundColor: "#f4c7c3"})
	}
	for _, g := range h.Grants {
		end := g.Ended
		if end < 0 {
			end = h.End
		}
		notes = append(notes, porcupine.Annotation{Tag: fmt.Sprintf("leases of client %d", g.Client),
			Start: int64(g.Granted), End: int64(end), Description: "token " + ShortToken(g.Token),
			Details: fmt.Sprintf("grant %d, %s, token %s, ended: %s", g.ID, g.Role, TokenText(g.Token), g.Cause)})
	}
	info.AddAnnotations(notes)
	return res, porcupine.Visualize(registerModel.ToModel(), info, w)
}

// unplaceable locates a history porcupine found not linearizable: of the writes
// that its longest partial linearization could not place, the one that
// returned first (by then it had to be placed, and could not be).
func unplaceable(hist []porcupine.Operation, info porcupine.LinearizationInfo) Span {
	parts := info.PartialLinearizations()
	if len(parts) == 0 || len(parts[0]) == 0 {
		return nowhere
	}
	longest := slices.MaxFunc(parts[0], func(a, b []int) int { return len(a) - len(b) })
	placed := make(map[int]bool, len(longest))
	for _, id := range longest {
		placed[id] = true
	}
	first := -1
	for i, o := range hist {
		if !placed[i] && (first < 0 || o.Return < hist[first].Return) {
			first = i
		}
	}
	if first < 0 {
		return nowhere
	}
	return Span{time.Duration(hist[first].Call), time.Duration(hist[first].Return)}
}
