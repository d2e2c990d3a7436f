package nemesis_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// knownValueBugs names the checks whose violations the short values run
// logs instead of failing ("linearizability", "stale read", ...): for a
// bug of package value found, reported and not fixed yet. Empty: every
// violation fails the run.
var knownValueBugs []string

// runValues is TestNemesis's values run on its ensemble cl: four clients
// reading and compare-and-setting one value.New node, each watching it,
// under the client faults but delete-dir (which deletes a directory this
// run does not use) and the server fault kind; the checker must find no
// violation but knownValueBugs', and the run must have written, conflicted
// and watched.
func runValues(t *testing.T, cl *zktest.Cluster, seed uint64, server string) *nemesis.Report {
	tg := nemesis.ZooKeeperTarget(cl)
	defer tg.Close()
	kinds := append([]string{server}, slices.DeleteFunc(slices.Clone(nemesis.ClientFaults), func(k string) bool { return k == nemesis.FaultDeleteDir })...)
	res := RunValue(t, tg, nemesis.Config{Seed: seed, Duration: *duration, FaultEvery: 300 * time.Millisecond, Faults: kinds}, knownValueBugs...)
	return &nemesis.Report{Faults: res.Report.Faults, FaultsFailed: res.Report.FaultsFailed}
}

// RunValue runs nemesis.RunValue on tg under cfg (Logf set to t.Logf) and
// fails t on a run that could not be carried out, on any violation (but
// those of the checks named in known, which it logs), and on a run with no
// ok TrySet, no conflict or no watched state.
func RunValue(t *testing.T, tg nemesis.Target, cfg nemesis.Config, known ...string) *nemesis.ValueResult {
	t.Helper()
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+nemtest.RunTimeout)
	defer cancel()
	start := time.Now()
	res, err := nemesis.RunValue(ctx, tg, cfg)
	if err != nil {
		t.Fatalf("values on %s, seed %d: %v", tg.Name(), cfg.Seed, err)
	}
	rep := res.Report
	t.Logf("values on %s, seed %d, in %v: %s", tg.Name(), cfg.Seed, time.Since(start).Round(time.Millisecond), rep.Summary())
	var bad, tolerated []string
	for _, v := range rep.Violations {
		if slices.ContainsFunc(known, func(k string) bool { return strings.HasPrefix(v, k+":") }) {
			tolerated = append(tolerated, v)
		} else {
			bad = append(bad, v)
		}
	}
	if len(tolerated) > 0 {
		t.Logf("%d known violations (%v), tolerated (%s); the first: %s", len(tolerated), known, KeepValue(res.History), tolerated[0])
	}
	if len(bad) > 0 {
		t.Errorf("%d violations (%s):\n%s", len(bad), KeepValue(res.History), strings.Join(bad, "\n"))
	}
	if rep.Sets[nemesis.ValueOK] == 0 || rep.Sets[nemesis.ValueConflict] == 0 || rep.Events == 0 {
		t.Errorf("the run tested little: %s", rep.Summary())
	}
	return res
}

// KeepValue writes h to a new file in the temporary directory and says
// where (or why not).
func KeepValue(h *nemesis.ValueHistory) string {
	f, err := os.CreateTemp("", fmt.Sprintf("nemesis-values-%s-seed%d-*.json", h.Backend, h.Seed))
	if err != nil {
		return "history NOT written: " + err.Error()
	}
	defer f.Close()
	if err := h.WriteJSON(f); err != nil {
		return "history NOT written: " + err.Error()
	}
	where := "history in " + f.Name()
	if slices.ContainsFunc(nemesis.CheckValue(h).Violations, func(v string) bool { return strings.HasPrefix(v, "linearizability:") }) {
		vf, err := os.Create(strings.TrimSuffix(f.Name(), ".json") + ".html")
		if err != nil {
			return where
		}
		defer vf.Close()
		if _, err := nemesis.VisualizeValue(vf, h); err == nil {
			where += ", porcupine's view in " + vf.Name()
		}
	}
	return where
}

// goodValueHistory is a small values history that breaks nothing: client
// 0 reads the value absent and creates it (version 1, zxid 10); client 1
// reads it and sets it over 1 (version 2, zxid 12) while client 0's set
// over 1 conflicts; client 1's set over 2 loses its reply (index 6: it
// may have applied, at zxid 14, or not); client 0 reads version 2 before
// that set is called; the final read shows version 2. Each client's watch
// follows, and delivers the final state.
func goodValueHistory() *nemesis.ValueHistory {
	st := func(v int64, d string, rev int64) nemesis.ValueState {
		return nemesis.ValueState{Version: v, Data: d, Rev: rev, Absent: v == 0}
	}
	get := func(c int, call, ret time.Duration, got nemesis.ValueState) nemesis.ValueOp {
		return nemesis.ValueOp{Client: c, Kind: nemesis.ValueGet, Call: call, Return: ret, Outcome: nemesis.ValueOK, Got: got}
	}
	set := func(c int, exp int64, data string, call, ret time.Duration, outcome string, got nemesis.ValueState) nemesis.ValueOp {
		return nemesis.ValueOp{Client: c, Kind: nemesis.ValueSet, Expected: exp, Data: data, Call: call, Return: ret, Outcome: outcome, Got: got}
	}
	ev := func(c int, at time.Duration, s nemesis.ValueState) nemesis.ValueEvent {
		return nemesis.ValueEvent{Client: c, At: at, State: s}
	}
	absent, v1, v2 := st(0, "", 5), st(1, "c0-1", 10), st(2, "c1-1", 12)
	return &nemesis.ValueHistory{
		Format: nemesis.ValueFormat, Backend: "zk", Seed: 1, Clients: 2, SessionTimeout: 2 * time.Second, Path: "/v",
		Ops: []nemesis.ValueOp{
			get(0, 0, 10*ms, absent),
			set(0, 0, "c0-1", 20*ms, 30*ms, nemesis.ValueOK, v1),
			get(1, 40*ms, 50*ms, v1),
			set(1, 1, "c1-1", 60*ms, 70*ms, nemesis.ValueOK, v2),
			set(0, 1, "c0-2", 65*ms, 80*ms, nemesis.ValueConflict, nemesis.ValueState{}),
			get(0, 90*ms, 100*ms, v2),
			set(1, 2, "c1-2", 110*ms, 1000*ms, nemesis.ValueUnknown, nemesis.ValueState{}),
			get(2, 2000*ms, 2010*ms, v2),
		},
		Events: []nemesis.ValueEvent{
			ev(0, 5*ms, absent), ev(0, 35*ms, v1), ev(0, 75*ms, v2),
			ev(1, 45*ms, v1), ev(1, 72*ms, v2),
		},
		Healed: 1500 * ms,
		Final:  v2,
		Last:   []nemesis.ValueState{v2, v2},
		LastAt: []time.Duration{75 * ms, 72 * ms},
		End:    3 * time.Second,
	}
}

// applied makes the lost set of goodValueHistory applied (at zxid 14):
// the final read and the watches show it.
func applied(h *nemesis.ValueHistory) {
	v3 := nemesis.ValueState{Version: 3, Data: "c1-2", Rev: 14}
	h.Ops[7].Got, h.Final = v3, v3
	h.Events = append(h.Events, nemesis.ValueEvent{Client: 0, At: 900 * ms, State: v3}, nemesis.ValueEvent{Client: 1, At: 910 * ms, State: v3})
	h.Last, h.LastAt = []nemesis.ValueState{v3, v3}, []time.Duration{900 * ms, 910 * ms}
}

// TestCheckValueCatchesBadValues is the checker's self-test: a history
// that breaks nothing passes, with its unknown write applied or not, and
// each mutation of it that makes the value lie is reported by the check
// named.
func TestCheckValueCatchesBadValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(h *nemesis.ValueHistory)
	}{
		{"unknown write not applied", func(*nemesis.ValueHistory) {}},
		{"unknown write applied", applied},
	} {
		h := goodValueHistory()
		c.mutate(h)
		if rep := nemesis.CheckValue(h); len(rep.Violations) > 0 {
			t.Fatalf("%s: a correct history has violations:\n%s", c.name, strings.Join(rep.Violations, "\n"))
		}
	}
	for _, c := range []struct {
		name   string
		want   []string
		mutate func(h *nemesis.ValueHistory)
	}{
		{"lost update: two sets over one version both ok", []string{"lost update", "linearizability"}, func(h *nemesis.ValueHistory) {
			h.Ops[4].Outcome, h.Ops[4].Err = nemesis.ValueOK, ""
			h.Ops[4].Got = nemesis.ValueState{Version: 2, Data: "c0-2", Rev: 13}
		}},
		{"stale read after a completed write", []string{"stale read", "linearizability"}, func(h *nemesis.ValueHistory) {
			h.Ops[5].Got = h.Ops[2].Got
		}},
		{"conflict while the version was the expected one throughout", []string{"linearizability"}, func(h *nemesis.ValueHistory) {
			h.Ops[4].Expected = 2
			h.Ops[4].Call = 75 * ms
		}},
		{"final read of an unknown write's data at the wrong version", []string{"written states"}, func(h *nemesis.ValueHistory) {
			applied(h)
			for _, s := range []*nemesis.ValueState{&h.Ops[7].Got, &h.Final, &h.Events[5].State, &h.Events[6].State, &h.Last[0], &h.Last[1]} {
				s.Version = 4
			}
		}},
		{"data never written", []string{"written states", "linearizability"}, func(h *nemesis.ValueHistory) { h.Ops[5].Got.Data = "c9-9" }},
		{"refused write shown", []string{"written states"}, func(h *nemesis.ValueHistory) { h.Events[2].State.Data = "c0-2" }},
		{"two states of one version", []string{"one state per version"}, func(h *nemesis.ValueHistory) { h.Events[4].State.Rev = 11 }},
		{"absent after the create", []string{"one state per version"}, func(h *nemesis.ValueHistory) {
			h.Events = slices.Insert(h.Events, 3, nemesis.ValueEvent{Client: 1, At: 41 * ms, State: nemesis.ValueState{Absent: true, Rev: 11}})
		}},
		{"ok set returning another version", []string{"shape"}, func(h *nemesis.ValueHistory) { h.Ops[3].Got.Version = 3 }},
		{"watch going back", []string{"watch order"}, func(h *nemesis.ValueHistory) {
			h.Events = append(h.Events, nemesis.ValueEvent{Client: 1, At: 80 * ms, State: h.Events[3].State})
			h.Last[1], h.LastAt[1] = h.Events[3].State, 80*ms
		}},
		{"not converged", []string{"convergence"}, func(h *nemesis.ValueHistory) { h.Last[1] = h.Events[3].State }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := goodValueHistory()
			c.mutate(h)
			rep := nemesis.CheckValue(h)
			for _, want := range c.want {
				if !slices.ContainsFunc(rep.Violations, func(v string) bool { return strings.HasPrefix(v, want+":") }) {
					t.Errorf("no %q violation; violations: %q", want, rep.Violations)
				}
			}
			if len(rep.Violations) > 0 {
				t.Logf("caught: %s", strings.Join(rep.Violations, "\n"))
			}
		})
	}
}

// TestVisualizeValue: porcupine's view of a lost update says Illegal and
// shows the calls; of a good history, Ok.
func TestVisualizeValue(t *testing.T) {
	h := goodValueHistory()
	var b strings.Builder
	if res, err := nemesis.VisualizeValue(&b, h); err != nil || res != porcupine.Ok {
		t.Fatalf("good history: %v, %v", res, err)
	}
	h.Ops[4].Outcome, h.Ops[4].Err = nemesis.ValueOK, ""
	h.Ops[4].Got = nemesis.ValueState{Version: 2, Data: "c0-2", Rev: 13}
	b.Reset()
	res, err := nemesis.VisualizeValue(&b, h)
	if err != nil || res != porcupine.Illegal || !strings.Contains(b.String(), `set(1,\"c0-2\")`) {
		t.Fatalf("lost update: %v, %v; the view shows the set: %t", res, err, strings.Contains(b.String(), `set(1,\"c0-2\")`))
	}
}
