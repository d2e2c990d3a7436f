package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ms = time.Millisecond

// history is a small run of two clients: grant 0 is released, grant 1 is
// lost to an expiry of client 1's session, grant 2 is live at the end; a
// late write of grant 0 is refused; a leader is killed.
func history() *nemesis.History {
	released := recipe.ErrReleased.Error()
	return &nemesis.History{
		Format: nemesis.HistoryFormat, Recipe: "mutex", Seed: 7, Clients: 2, SessionTimeout: 2 * time.Second,
		Healed: 900 * ms, FirstGrantAfterHeal: 950 * ms, End: time.Second,
		Grants: []nemesis.Grant{
			{ID: 0, Client: 0, Role: nemesis.RoleHolder, Token: 10, Asked: 0, Granted: 10 * ms, Ended: 100 * ms, Cause: released},
			{ID: 1, Client: 1, Role: nemesis.RoleHolder, Token: 20, Asked: 5 * ms, Granted: 110 * ms, Ended: 300 * ms, Cause: recipe.ErrSessionLost.Error()},
			{ID: 2, Client: 0, Role: nemesis.RoleHolder, Token: 30, Asked: 900 * ms, Granted: 950 * ms, Ended: -1},
		},
		Ops: []nemesis.Op{
			{Kind: nemesis.OpGrant, Client: 0, Grant: 0, Token: 10, Call: 10 * ms, Return: 10 * ms, Live: []int{0}},
			{Kind: nemesis.OpWrite, Client: 0, Grant: 0, Token: 10, Register: nemesis.RegZnode, Value: "a", Outcome: nemesis.Accepted, Call: 20 * ms, Return: 30 * ms, Live: []int{0}},
			{Kind: nemesis.OpGrant, Client: 1, Grant: 1, Token: 20, Call: 110 * ms, Return: 110 * ms, Live: []int{1}},
			{Kind: nemesis.OpWrite, Client: 1, Grant: 1, Token: 20, Register: nemesis.RegZnode, Value: "b", Outcome: nemesis.Accepted, Prev: nemesis.State{Token: 10, Value: "a"}, Call: 120 * ms, Return: 130 * ms, Live: []int{1}},
			{Kind: nemesis.OpWrite, Client: 0, Grant: 0, Token: 10, Register: nemesis.RegZnode, Value: "a2", Outcome: nemesis.Stale, Call: 140 * ms, Return: 150 * ms},
			{Kind: nemesis.OpWrite, Client: 0, Grant: 0, Token: 10, Register: nemesis.RegGuard, Value: "g", Outcome: nemesis.Accepted, Seq: 1, Call: 20 * ms, Return: 21 * ms, Live: []int{0}},
			{Kind: nemesis.OpWrite, Client: 1, Grant: 1, Token: 20, Register: nemesis.RegGuard, Value: "h", Outcome: nemesis.Accepted, Prev: nemesis.State{Token: 10, Value: "g"}, Seq: 2, Call: 120 * ms, Return: 121 * ms, Live: []int{1}},
			{Kind: nemesis.OpWrite, Client: 0, Grant: 0, Token: 10, Register: nemesis.RegGuard, Value: "g2", Outcome: nemesis.Stale, Call: 140 * ms, Return: 141 * ms},
			{Kind: nemesis.OpAcquire, Client: 1, Grant: -1, Call: 400 * ms, Return: 800 * ms, Err: "context deadline exceeded"},
		},
		Faults: []nemesis.Fault{
			{Kind: nemesis.FaultKillLeader, Target: "server 2", Client: -1, Start: 200 * ms, End: 700 * ms},
			{Kind: nemesis.FaultExpire, Target: "client 1 session 0x1", Client: 1, Start: 250 * ms, End: 260 * ms, Revokes: true, Certain: true, Below: 25},
		},
	}
}

// TestPageOfACorrectRun: one lane per client, every lease coloured by how
// it ended, the writes with their outcomes and tokens, the faults as bands
// (the server's across the lanes, the client's on its lane), the check
// results, and the whole run shown.
func TestPageOfACorrectRun(t *testing.T) {
	h := history()
	rep := nemesis.Check(h, nemesis.AtMost(1))
	if len(rep.Violations) > 0 {
		t.Fatalf("violations: %q", rep.Violations)
	}
	page := render(t, h, rep)
	for _, want := range []string{
		`>client 0</text>`, `>client 1</text>`,
		`class="lease released" data-a="10.000" data-b="100.000"`,
		`class="lease session-lost" data-a="110.000" data-b="300.000"`,
		`class="lease live" data-a="950.000" data-b="1000.000"`, // to the end of the run
		`class="w stale" data-a="140.000" data-b="150.000"`,
		`class="w accepted" data-a="120.000" data-b="130.000"`,
		`class="t mid wt stale" data-a="150.000" y="`, // its token, 10
		`class="band kill-leader" data-a="200.000" data-b="700.000"`,
		`class="fault kill-leader"`,
		`class="band expire-session" data-a="250.000" data-b="260.000"`,
		`class="afail" data-a="400.000" data-b="800.000"`,
		`data-view="0-1.010"`,
		`no violation`, `>guard</text>`, `>znode</text>`,
		`<a id="stale-znode" href="#t=0.000-0.750" title="show the first">1 stale, refused</a>`,
		`kill-leader 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// The server fault's band covers both lanes; the expiry's only client 1's.
	lanes := regexp.MustCompile(`<text class="lane-label" x="6" y="([\d.]+)"`).FindAllStringSubmatch(page, -1)
	if len(lanes) != 3 { // faults, client 0, client 1
		t.Fatalf("lane labels: %q", lanes)
	}
	band := regexp.MustCompile(`class="band kill-leader" [^>]* y="([\d.]+)" height="([\d.]+)"`).FindStringSubmatch(page)
	exp := regexp.MustCompile(`class="band expire-session" [^>]* y="([\d.]+)" height="([\d.]+)"`).FindStringSubmatch(page)
	if band == nil || exp == nil {
		t.Fatal("no fault bands")
	}
	if y, h := num(band[1]), num(band[2]); y > num(lanes[1][1]) || y+h < num(lanes[2][1])+20 {
		t.Errorf("server fault band y %v height %v does not cover the lanes at %s and %s", y, h, lanes[1][1], lanes[2][1])
	}
	if y := num(exp[1]); y < num(lanes[2][1])-3 {
		t.Errorf("client 1's expiry band starts at y %v, above its lane at %s", y, lanes[2][1])
	}
}

// TestPageOfAViolation: the page says what broke, marks it, links it, and
// opens at its interval.
func TestPageOfAViolation(t *testing.T) {
	h := history()
	h.Ops[2].Live = []int{0, 1} // grant 0 still live when grant 1 was made
	h.Grants[0].Ended = 200 * ms
	rep := nemesis.Check(h, nemesis.AtMost(1))
	if len(rep.Violations) != 1 {
		t.Fatalf("violations: %q", rep.Violations)
	}
	page := render(t, h, rep)
	// the overlap, from grant 1 (110 ms) to the end of grant 0 (200 ms),
	// padded by 300 ms
	for _, want := range []string{`data-view="0.000-0.500"`, `href="#t=0.000-0.500"`, `class="viol" data-a="110.000" data-b="200.000"`,
		`class="viol first" data-a="110.000" data-b="200.000"`,
		`>violation 1</text>`, `1 violation</span>`, `2 lease contexts live at once`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// TestPageOfManyViolations: overlapping violations are one band; the list
// at the top is bounded.
func TestPageOfManyViolations(t *testing.T) {
	h := history()
	rep := nemesis.Check(h, nemesis.AtMost(1))
	for i := range 150 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("planted %d", i))
		rep.Where = append(rep.Where, nemesis.Span{From: time.Duration(400+i) * ms, To: time.Duration(410+i) * ms})
	}
	rep.Violations = append(rep.Violations, "a leak")
	rep.Where = append(rep.Where, nemesis.Span{From: -1, To: -1})
	page := render(t, h, rep)
	for _, want := range []string{`class="viol" data-a="400.000" data-b="559.000"`, `>150 violations</text>`, `class="viol first" data-a="400.000" data-b="410.000"`,
		`and 51 more`, `data-view="0.100-0.710"`, `151 violations</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(page, `class="viol"`); n != 1 {
		t.Errorf("%d violation bands, want 1", n)
	}
	if n := strings.Count(page, `>violation 1</text>`); n != 1 {
		t.Errorf("violation 1 labelled %d times", n)
	}
}

// TestWrite writes the page and porcupine's view of each register, linked.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	h := history()
	if err := Write(dir, h, nemesis.Check(h, nemesis.AtMost(1))); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, Page))
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range []string{"guard", "znode"} {
		f := "porcupine-" + reg + ".html"
		if !strings.Contains(string(page), `href="`+f+`"`) {
			t.Errorf("the page does not link %s", f)
		}
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `write(20,\"b\") -\u003e accepted over (10,\"a\")`) && !strings.Contains(string(b), "accepted over (10") {
			t.Errorf("%s does not describe the writes", f)
		}
		if !strings.Contains(string(b), `<a href="index.html">&larr; the run's page</a>`) ||
			!strings.Contains(string(b), "<title>porcupine: nemesis mutex, seed 7: register "+reg+"</title>") {
			t.Errorf("%s does not link back to the run's page", f)
		}
	}
	if !strings.Contains(string(page), `<span class="lin Ok">linearizable</span>`) {
		t.Error("the page does not give porcupine's verdict")
	}
	if err := Write(filepath.Join(dir, Page, "x"), h, nemesis.Check(h, nemesis.AtMost(1))); err == nil {
		t.Error("writing under a file: no error")
	}
}

func TestEnding(t *testing.T) {
	for cause, want := range map[string]string{
		recipe.ErrReleased.Error(): "released", recipe.ErrSuspended.Error(): "suspended",
		"recipe: session lost: expired": "session-lost", recipe.ErrNodeDeleted.Error(): "node-deleted",
		recipe.ErrSessionClosed.Error(): "session-closed", "": "live", "context canceled": "other",
	} {
		if got := Ending(cause); got != want {
			t.Errorf("Ending(%q) = %q, want %q", cause, got, want)
		}
	}
}

func render(t *testing.T, h *nemesis.History, rep *nemesis.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, h, rep, nil); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("REPORT_TEST_DIR"); d != "" { // to look at it in a browser
		_ = os.WriteFile(filepath.Join(d, t.Name()+".html"), b.Bytes(), 0o644)
	}
	return b.String()
}

func num(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return f
}
