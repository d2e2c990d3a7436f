package nemesis_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/nemtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// runMembership is TestNemesis's membership run on its ensemble cl: four
// members joining, updating, leaving and joining again, each watching the
// group on its own session, under every client fault (expire-session and
// delete-dir among them) and the server fault kind; the checker must find
// no violation, and the run must have made views, registrations and
// re-registrations. (The longer runs, every server fault included, are
// cmd/nemesis's: docs/reliability.md.)
func runMembership(t *testing.T, cl *zktest.Cluster, seed uint64, server string) *nemesis.Report {
	tg := nemesis.ZooKeeperTarget(cl)
	defer tg.Close()
	kinds := append([]string{server}, nemesis.ClientFaults...)
	res := RunMembership(t, tg, nemesis.Config{Seed: seed, Duration: max(*duration, 6*time.Second), FaultEvery: 300 * time.Millisecond, Faults: kinds})
	return &nemesis.Report{Faults: res.Report.Faults, FaultsFailed: res.Report.FaultsFailed}
}

// RunMembership runs nemesis.RunMembership on tg under cfg (Logf set to
// t.Logf) and fails t on a run that could not be carried out, on any
// violation, and on a run with no view, no update or no registration made
// again by a member itself.
func RunMembership(t *testing.T, tg nemesis.Target, cfg nemesis.Config) *nemesis.MembershipResult {
	t.Helper()
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+nemtest.RunTimeout)
	defer cancel()
	start := time.Now()
	res, err := nemesis.RunMembership(ctx, tg, cfg)
	if err != nil {
		t.Fatalf("members on %s, seed %d: %v", tg.Name(), cfg.Seed, err)
	}
	rep := res.Report
	t.Logf("members on %s, seed %d, in %v: %s", tg.Name(), cfg.Seed, time.Since(start).Round(time.Millisecond), rep.Summary())
	for _, f := range res.History.Faults {
		if f.Err != "" {
			t.Logf("fault %s on %s at %v failed: %s", f.Kind, f.Target, f.Start, f.Err)
		}
	}
	if len(rep.Violations) > 0 {
		t.Errorf("%d violations (%s):\n%s", len(rep.Violations), KeepMembership(res.History), strings.Join(rep.Violations, "\n"))
	}
	again := 0
	for _, s := range res.History.Spans {
		if s.Asked > 0 && slices.ContainsFunc(res.History.Spans, func(p nemesis.MemberSpan) bool {
			return p.Client == s.Client && p.Member == s.Member && p.End == s.Asked
		}) {
			again++
		}
	}
	t.Logf("registrations made again by a member itself: %d", again)
	if rep.Views == 0 || rep.Calls[nemesis.CallUpdate] == 0 || again == 0 {
		t.Errorf("the run tested little: %d views, %d updates, %d registrations made again", rep.Views, rep.Calls[nemesis.CallUpdate], again)
	}
	return res
}

const s = time.Second

// goodHistory is a small membership history that breaks nothing: c0
// registers, is cut off (its context ends at 5 s, its node stays until
// the session expires), registers again at 7 s; c1 stays; the final read
// shows both.
func goodHistory() *nemesis.MembershipHistory {
	vm := func(id string, since int64, data string) nemesis.ViewMember {
		return nemesis.ViewMember{ID: id, Since: since, Data: data}
	}
	return &nemesis.MembershipHistory{
		Format: nemesis.MembershipFormat, Backend: "zk", Seed: 1, Clients: 2, SessionTimeout: 2 * s,
		Spans: []nemesis.MemberSpan{
			{Client: 0, ID: "c0", Member: 0, Since: 10, Asked: s, Start: 1100 * time.Millisecond, End: 5 * s, Cause: "suspended"},
			{Client: 0, ID: "c0", Member: 0, Since: 30, Asked: 5 * s, Start: 7 * s, End: -1},
			{Client: 1, ID: "c1", Member: 0, Since: 11, Asked: s, Start: 1200 * time.Millisecond, End: -1},
		},
		Calls: []nemesis.MemberCall{
			{Client: 0, ID: "c0", Kind: nemesis.CallJoin, Value: "c0.1", Seq: 1, Call: s, Return: 1100 * time.Millisecond},
			{Client: 1, ID: "c1", Kind: nemesis.CallJoin, Value: "c1.1", Seq: 1, Call: s, Return: 1200 * time.Millisecond},
			{Client: 1, ID: "c1", Kind: nemesis.CallUpdate, Value: "c1.2", Seq: 2, Call: 2 * s, Return: 2100 * time.Millisecond},
		},
		Views: []nemesis.ViewRec{
			{Watcher: 0, At: 1300 * time.Millisecond, Rev: 11, Members: []nemesis.ViewMember{vm("c0", 10, "c0.1"), vm("c1", 11, "c1.1")}},
			{Watcher: 1, At: 1400 * time.Millisecond, Rev: 11, Members: []nemesis.ViewMember{vm("c0", 10, "c0.1"), vm("c1", 11, "c1.1")}},
			{Watcher: 0, At: 2200 * time.Millisecond, Rev: 12, Members: []nemesis.ViewMember{vm("c0", 10, "c0.1"), vm("c1", 11, "c1.2")}},
			// c0's node is still there after its context ended: the session
			// has not expired yet.
			{Watcher: 1, At: 6 * s, Rev: 12, Members: []nemesis.ViewMember{vm("c0", 10, "c0.1"), vm("c1", 11, "c1.2")}},
			{Watcher: 1, At: 6500 * time.Millisecond, Rev: 20, Members: []nemesis.ViewMember{vm("c1", 11, "c1.2")}},
			{Watcher: 0, At: 7100 * time.Millisecond, Rev: 30, Members: []nemesis.ViewMember{vm("c0", 30, "c0.1"), vm("c1", 11, "c1.2")}},
			{Watcher: 1, At: 7200 * time.Millisecond, Rev: 30, Members: []nemesis.ViewMember{vm("c0", 30, "c0.1"), vm("c1", 11, "c1.2")}},
		},
		Healed:  8 * s,
		Final:   nemesis.ViewRec{Watcher: -1, At: 8500 * time.Millisecond, Rev: 30, Members: []nemesis.ViewMember{vm("c0", 30, "c0.1"), vm("c1", 11, "c1.2")}},
		Stopped: 9 * s, End: 10 * s,
	}
}

// TestCheckMembershipCatchesBadViews is the checker's self-test: a history
// that breaks nothing passes, and each mutation of it that makes a view
// false (a removed member shown long after, a member never registered with
// that Since, data never written or stale, a view going back, a live
// member missing, two states of one Rev, a watcher that never converged)
// is reported by the check named.
func TestCheckMembershipCatchesBadViews(t *testing.T) {
	if rep := nemesis.CheckMembership(goodHistory()); len(rep.Violations) > 0 {
		t.Fatalf("a correct history has violations:\n%s", strings.Join(rep.Violations, "\n"))
	}
	for _, c := range []struct {
		name, want string
		mutate     func(h *nemesis.MembershipHistory)
	}{
		{"stale view", "soundness", func(h *nemesis.MembershipHistory) {
			// c0@10 ended at 5 s: gone by 8 s, may be shown until 11 s.
			h.Views = append(h.Views, nemesis.ViewRec{Watcher: 1, Watch: 1, At: 11500 * time.Millisecond, Rev: 31, Members: h.Views[3].Members})
			h.Final.At, h.Stopped, h.End = 12*s, 12*s, 13*s
			h.Final.Members = h.Views[3].Members
			h.Views[len(h.Views)-2].Members = h.Views[3].Members
		}},
		{"never registered", "soundness", func(h *nemesis.MembershipHistory) { h.Views[6].Members[0].Since = 99 }},
		{"shown before its Join", "soundness", func(h *nemesis.MembershipHistory) { h.Views[0].At = 900 * time.Millisecond }},
		{"data never written", "data", func(h *nemesis.MembershipHistory) { h.Views[1].Members[1].Data = "c1.9" }},
		{"data of another member", "data", func(h *nemesis.MembershipHistory) { h.Views[1].Members[1].Data = "c0.1" }},
		{"stale data", "data", func(h *nemesis.MembershipHistory) { h.Views[5].Members[1].Data = "c1.1" }},
		{"view going back", "rev order", func(h *nemesis.MembershipHistory) { h.Views[2].Rev = 10 }},
		{"live member missing", "completeness", func(h *nemesis.MembershipHistory) {
			h.Views[3].Members, h.Views[3].Rev = h.Views[3].Members[:1], 13
		}},
		{"two states of one Rev", "one state per Rev", func(h *nemesis.MembershipHistory) { h.Views[4].Rev = 12 }},
		{"not sorted", "view shape", func(h *nemesis.MembershipHistory) {
			m := h.Views[0].Members
			m[0], m[1] = m[1], m[0]
		}},
		{"not converged", "convergence", func(h *nemesis.MembershipHistory) { h.Views = slices.Delete(h.Views, 6, 7) }},
		{"twice at once", "one registration per id", func(h *nemesis.MembershipHistory) { h.Spans[0].End = 8 * s }},
		{"revocation unheard", "revocation", func(h *nemesis.MembershipHistory) {
			h.Faults = []nemesis.Fault{{Kind: nemesis.FaultExpire, Client: 1, Start: 3 * s, End: 3 * s, Revokes: true, Certain: true, Below: 25}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := goodHistory()
			c.mutate(h)
			rep := nemesis.CheckMembership(h)
			if !slices.ContainsFunc(rep.Violations, func(v string) bool { return strings.HasPrefix(v, c.want+":") || strings.Contains(v, c.want) }) {
				t.Fatalf("no %q violation; violations: %q", c.want, rep.Violations)
			}
			t.Logf("caught: %s", rep.Violations[0])
		})
	}
}

// TestCheckMembershipExcusesRevocations: a view lacking a live member is
// no violation when a revocation of its registration (an expiry of its
// session that may have taken effect) began before the view; one of
// another client's session excuses nothing.
func TestCheckMembershipExcusesRevocations(t *testing.T) {
	for _, client := range []int{1, 0} {
		h := goodHistory()
		h.Views[3].Members, h.Views[3].Rev = h.Views[3].Members[:1], 13 // c1@11 missing at 6 s
		h.Faults = []nemesis.Fault{{Kind: nemesis.FaultExpire, Client: client, Start: 5 * s, End: 5 * s, Revokes: true, Err: "timed out"}}
		rep := nemesis.CheckMembership(h)
		if excused := len(rep.Violations) == 0; excused != (client == 1) {
			t.Errorf("expiry of client %d: excused %t; violations: %q", client, excused, rep.Violations)
		}
	}
}

// KeepMembership writes h to a new file in the temporary directory and
// says where (or why not).
func KeepMembership(h *nemesis.MembershipHistory) string {
	f, err := os.CreateTemp("", fmt.Sprintf("nemesis-members-%s-seed%d-*.json", h.Backend, h.Seed))
	if err != nil {
		return "history NOT written: " + err.Error()
	}
	defer f.Close()
	if err := h.WriteJSON(f); err != nil {
		return "history NOT written: " + err.Error()
	}
	return "history in " + f.Name()
}
