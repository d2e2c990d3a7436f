package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

const ms = time.Millisecond

func tok(epoch, counter uint64) fence.Token { return fence.Token(epoch<<32 | counter) }

// runHistory is a mutex run: client 1's grant (1:5) is revoked by a
// deletion of the directory, client 0 is granted 1:7 and writes, then
// client 1 writes with 1:5 and is refused.
func runHistory() *nemesis.History {
	deleted := recipe.ErrNodeDeleted.Error()
	return &nemesis.History{
		Recipe: "mutex", Seed: 1, Clients: 2, SessionTimeout: 2 * time.Second, Healed: 900 * ms, FirstGrantAfterHeal: 946 * ms, End: time.Second,
		Grants: []nemesis.Grant{
			{ID: 0, Client: 1, Role: nemesis.RoleHolder, Token: tok(1, 5), Asked: 0, Granted: 10 * ms, Ended: 400 * ms, Cause: deleted},
			{ID: 1, Client: 0, Role: nemesis.RoleHolder, Token: tok(1, 7), Asked: 100 * ms, Granted: 250 * ms, Ended: 500 * ms, Cause: recipe.ErrReleased.Error()},
			{ID: 2, Client: 0, Role: nemesis.RoleHolder, Token: tok(1, 9), Asked: 900 * ms, Granted: 946 * ms, Ended: -1},
		},
		Ops: []nemesis.Op{
			{Kind: nemesis.OpGrant, Client: 1, Grant: 0, Token: tok(1, 5), Call: 10 * ms, Return: 10 * ms, Live: []int{0}},
			{Kind: nemesis.OpGrant, Client: 0, Grant: 1, Token: tok(1, 7), Call: 250 * ms, Return: 250 * ms, Live: []int{1}},
			{Kind: nemesis.OpWrite, Client: 0, Grant: 1, Token: tok(1, 7), Register: nemesis.RegZnode, Value: "a", Outcome: nemesis.Accepted, Call: 260 * ms, Return: 270 * ms, Live: []int{1}},
			{Kind: nemesis.OpWrite, Client: 1, Grant: 0, Token: tok(1, 5), Register: nemesis.RegZnode, Value: "b", Outcome: nemesis.Stale, Call: 300 * ms, Return: 310 * ms},
			{Kind: nemesis.OpGrant, Client: 0, Grant: 2, Token: tok(1, 9), Call: 946 * ms, Return: 946 * ms, Live: []int{2}},
		},
		Faults: []nemesis.Fault{
			{Kind: nemesis.FaultDeleteDir, Target: "/nemesis/mutex/lock", Client: -1, Start: 200 * ms, End: 240 * ms, Revokes: true, Certain: true, Below: tok(1, 6)},
			{Kind: nemesis.FaultStopServer, Target: "server 0", Client: -1, Start: 100 * ms, End: 800 * ms},
		},
	}
}

// brokenHistory is the broken recipe's run: client 1 is granted 1:3 while
// client 0 holds 1:4, whose write to the znode register fences 1:3's two
// writes there out; the guard, which 1:4 never wrote, accepts 1:3.
func brokenHistory() *nemesis.History {
	released := recipe.ErrReleased.Error()
	return &nemesis.History{
		Recipe: "broken-mutex", Seed: 1, Clients: 2, SessionTimeout: 2 * time.Second, Healed: 900 * ms, FirstGrantAfterHeal: -1, End: time.Second,
		Grants: []nemesis.Grant{
			{ID: 0, Client: 0, Role: nemesis.RolePermit, Token: tok(1, 4), Asked: 0, Granted: 100 * ms, Ended: 300 * ms, Cause: released},
			{ID: 1, Client: 1, Role: nemesis.RolePermit, Token: tok(1, 3), Asked: 0, Granted: 150 * ms, Ended: 400 * ms, Cause: released},
		},
		Ops: []nemesis.Op{
			{Kind: nemesis.OpGrant, Client: 0, Grant: 0, Token: tok(1, 4), Call: 100 * ms, Return: 100 * ms, Live: []int{0}},
			{Kind: nemesis.OpWrite, Client: 0, Grant: 0, Token: tok(1, 4), Register: nemesis.RegZnode, Value: "a", Outcome: nemesis.Accepted, Call: 110 * ms, Return: 120 * ms, Live: []int{0}},
			{Kind: nemesis.OpGrant, Client: 1, Grant: 1, Token: tok(1, 3), Call: 150 * ms, Return: 150 * ms, Live: []int{0, 1}},
			{Kind: nemesis.OpWrite, Client: 1, Grant: 1, Token: tok(1, 3), Register: nemesis.RegZnode, Value: "b", Outcome: nemesis.Stale, Call: 160 * ms, Return: 170 * ms},
			{Kind: nemesis.OpWrite, Client: 1, Grant: 1, Token: tok(1, 3), Register: nemesis.RegZnode, Value: "c", Outcome: nemesis.Stale, Call: 180 * ms, Return: 190 * ms},
			// the guard never saw 1:4: it rightly accepts 1:3
			{Kind: nemesis.OpWrite, Client: 1, Grant: 1, Token: tok(1, 3), Register: nemesis.RegGuard, Value: "d", Outcome: nemesis.Accepted, Seq: 1, Call: 200 * ms, Return: 201 * ms},
		},
	}
}

func writeRun(t *testing.T, h *nemesis.History) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := h.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBlock: the captions say what the pictures show, from the runs.
func TestBlock(t *testing.T) {
	in := Inputs{RunDir: writeRun(t, runHistory()), BrokenDir: writeRun(t, brokenHistory()), FaultPhase: 90 * time.Second,
		BrokenPhase: 3 * time.Second, ZooKeeper: "3.8.0", Stale: "#t=0.000-0.910", StaleRegister: "znode"}
	block, err := in.Block()
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(block), " ")
	for _, want := range []string{
		Begin, End,
		"A mutex run with 90 s of faults (seed 1, 2 clients, ZooKeeper 3.8.0): 3 grants, 1 accepted write over 1 register, 1 write refused as stale, 2 faults (delete-dir 1, stop-server 1), no violation, first grant 46 ms after the heal.",
		"(img/nemesis-run.png)",
		`first write to the znode register refused as stale (the link on "1 stale, refused"), zoomed at 0.000 to 0.910 s:`,
		"client 1 writes with token 1:5 (its grant 0, which ended as node deleted) at 0.300 s, after client 0's write with 1:7 was accepted at 0.270 s, and is refused (red)",
		"faults in view: stop-server 0 (0.100 to 0.800 s), delete-dir (0.200 to 0.240 s):",
		"![Zoomed at 0.000 to 0.910 s: the first write refused as stale, in red](img/nemesis-stale.png)",
		"(a semaphore of two permits posing as a mutex, 3 s of faults, seed 1)",
		"at the first of its 2 violations, outlined in red from 0.150 to 0.300 s,", // the overlap, not from 0.100
		"client 1 was granted token 1:3 at 0.150 s while client 0 still held 1:4 (granted at 0.100 s)",
		"Once a register has accepted a write of the higher token, 1:4, it refuses every later write of 1:3 (red; 2 writes): the fence holds where the lock does not:",
		"(img/nemesis-violation.png)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the captions lack %q:\n%s", want, block)
		}
	}
	for _, line := range strings.Split(block, "\n") {
		if len(line) > 74 && !strings.HasPrefix(line, "![") && !strings.HasPrefix(line, "<!--") {
			t.Errorf("line longer than 74: %q", line)
		}
	}

	// No stale picture: no caption for it.
	in.Stale = ""
	if block, err := in.Block(); err != nil || strings.Contains(block, "nemesis-stale.png") {
		t.Errorf("without -stale: %v\n%s", err, block)
	}
	// A register with no stale write, a broken run with no violation: errors.
	in.Stale, in.StaleRegister = "#t=0-1", "guard"
	if _, err := in.Block(); err == nil || !strings.Contains(err.Error(), `no write to register "guard" refused as stale`) {
		t.Errorf("a register without stale writes: %v", err)
	}
	in.Stale, in.BrokenDir = "", in.RunDir
	if _, err := in.Block(); err == nil || !strings.Contains(err.Error(), "no located violation") {
		t.Errorf("a broken run without violation: %v", err)
	}
}

// TestReplaceBlock replaces the block and nothing else; a file without
// the markers is an error and is left as it is.
func TestReplaceBlock(t *testing.T) {
	f := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Doc\n\nbefore\n\n" + Begin + "\nold caption\n" + End + "\n\nafter\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceBlock(f, Begin+"\nnew caption\n"+End+"\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if want := "# Doc\n\nbefore\n\n" + Begin + "\nnew caption\n" + End + "\n\nafter\n"; string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	if err := os.WriteFile(f, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceBlock(f, "x"); err == nil {
		t.Error("no markers: no error")
	}
	if b, _ := os.ReadFile(f); string(b) != "no markers\n" {
		t.Errorf("the file changed: %q", b)
	}
}
