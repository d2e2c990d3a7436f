package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestElectFailover: the first candidate leads and runs its command; the
// second waits. SIGTERM to the leader stops its command and makes it exit
// 143; the second then leads with a larger token. inspect shows it as
// leader with its --id. SIGINT to it is forwarded to its command as is.
func TestElectFailover(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := fmt.Sprintf(`trap 'echo "stop $ZKRECIPES_ID" >> %[1]s; exit 0' TERM INT; echo "lead $ZKRECIPES_ID $ZKRECIPES_TOKEN" >> %[1]s; while :; do sleep 0.1; done`, log)
	a := start(t, cl, dir, "elect", "/elections/e", "--id", "a", "--", "sh", "-c", script)
	a.awaitLog("leading")
	awaitLines(t, log, 1) // a's command has set its trap
	b := start(t, cl, dir, "elect", "/elections/e", "--id", "b", "--", "sh", "-c", script)
	serverkit.Eventually(t, 20*time.Second, "b queued", func() bool {
		return len(zktest.Inspect(t, cl).Children("/elections/e")) == 2
	})
	if b.logged("leading") != nil {
		t.Fatal("two leaders")
	}
	a.signal(syscall.SIGTERM)
	a.expect(128+int(syscall.SIGTERM), 30*time.Second)
	b.awaitLog("leading")
	awaitLines(t, log, 3) // lead a, stop a, lead b: b's command has set its trap

	in := start(t, cl, dir, "inspect", "--json", "/elections/e")
	in.expect(0, 30*time.Second)
	var v View
	if err := json.Unmarshal([]byte(in.stdout.String()), &v); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, in.stdout)
	}
	if v.Recipe != "election" || len(v.Participants) != 1 || v.Participants[0].Role != "leader" || v.Participants[0].Data != "b" {
		t.Fatalf("inspect after failover: %+v", v)
	}
	b.signal(syscall.SIGINT)
	b.expect(128+int(syscall.SIGINT), 30*time.Second)

	lines := readLines(t, log)
	want := regexp.MustCompile(`^lead a (\d+)\|stop a\|lead b (\d+)\|stop b$`)
	m := want.FindStringSubmatch(strings.Join(lines, "|"))
	if m == nil {
		t.Fatalf("want a leading, stopped, then b: %q", lines)
	}
	ta, _ := strconv.ParseUint(m[1], 10, 64)
	tb, _ := strconv.ParseUint(m[2], 10, 64)
	if tb <= ta {
		t.Fatalf("b's token %d is not larger than a's %d", tb, ta)
	}
}

// TestElectOnceAndAgain: with --once, zkrecipes exits with the command's
// status after one leadership; without it, a command that exits is run
// again after a new campaign.
func TestElectOnceAndAgain(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	start(t, cl, dir, "elect", "--once", "/elections/once", "--id", "x", "--", "sh", "-c", "exit 4").expect(4, 30*time.Second)
	log := filepath.Join(dir, "log")
	p := start(t, cl, dir, "elect", "/elections/again", "--id", "y", "--", "sh", "-c", fmt.Sprintf(`echo "$ZKRECIPES_TOKEN" >> %s`, log))
	serverkit.Eventually(t, 20*time.Second, "the command run twice", func() bool { return len(readLines(t, log)) >= 2 })
	p.signal(syscall.SIGTERM)
	p.expect(128+int(syscall.SIGTERM), 30*time.Second)
	lines := readLines(t, log)
	t1, _ := strconv.ParseUint(lines[0], 10, 64)
	t2, _ := strconv.ParseUint(lines[1], 10, 64)
	if t1 == 0 || t2 <= t1 {
		t.Fatalf("second leadership's token %d not larger than the first's %d", t2, t1)
	}
}

// TestInspect: a missing path is an error (66) and inspect creates
// nothing; for a lock with a holder and a waiter it lists both in order,
// with roles, growing tokens, sessions and the holder's host:pid; --watch
// prints again when the holder leaves.
func TestInspect(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	zk := zktest.Inspect(t, cl)
	dir := t.TempDir()
	missing := start(t, cl, dir, "inspect", "/locks/none")
	missing.expect(exitNoNode, 30*time.Second)
	if !strings.Contains(missing.stderr.String(), "no such znode") {
		t.Fatalf("no clear error: %s", missing.stderr)
	}
	if zk.Stat("/locks") != nil {
		t.Fatal("inspect created a znode")
	}

	gateA, gateB := filepath.Join(dir, "gateA"), filepath.Join(dir, "gateB")
	a := start(t, cl, dir, "lock", "/locks/i", "--", "sh", "-c", gateScript(gateA))
	a.awaitLog("lock acquired")
	b := start(t, cl, dir, "lock", "/locks/i", "--", "sh", "-c", gateScript(gateB))
	serverkit.Eventually(t, 20*time.Second, "b queued", func() bool { return len(zk.Children("/locks/i")) == 2 })

	w := startProc(t, cl, dir, true, "inspect", "--watch", "--json", "/locks/i")
	first := nextView(t, w)
	if first.Recipe != "mutex" || len(first.Participants) != 2 {
		t.Fatalf("first view: %+v", first)
	}
	h, q := first.Participants[0], first.Participants[1]
	if h.Role != "holder" || q.Role != "waiting" || q.Token <= h.Token || h.SessionID == q.SessionID ||
		h.Data != fmt.Sprintf("%s:%d", hostname(t), a.cmd.Process.Pid) || h.AgeSec < 0 {
		t.Fatalf("holder %+v, waiter %+v", h, q)
	}
	tab := start(t, cl, dir, "inspect", "/locks/i")
	tab.expect(0, 30*time.Second)
	if out := tab.stdout.String(); !regexp.MustCompile(`(?m)^0 +holder +lock +\d+ +0x[0-9a-f]+ .*\n1 +waiting +lock `).MatchString(out) {
		t.Fatalf("text output:\n%s", out)
	}
	touch(t, gateA)
	a.expect(0, 30*time.Second)
	next := nextView(t, w)
	if len(next.Participants) != 1 || next.Participants[0].Role != "holder" || next.Participants[0].Token != q.Token {
		t.Fatalf("after the holder left: %+v", next)
	}
	touch(t, gateB)
	b.expect(0, 30*time.Second)
	w.signal(syscall.SIGINT)
	w.expect(0, 30*time.Second)
}

// nextView reads the next JSON line of inspect --watch --json.
func nextView(t *testing.T, p *proc) View {
	t.Helper()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("inspect --watch ended; log:\n%s", p.stderr)
			}
			var v View
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("not a JSON line: %q", l)
			}
			return v
		case <-time.After(20 * time.Second):
			t.Fatalf("inspect --watch printed nothing within 20 s; log:\n%s", p.stderr)
		}
	}
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := osHostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestMetricsEndpoint: lock --metrics-addr serves the acquisition and the
// session's state at /metrics while the command runs.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	p := start(t, cl, dir, "lock", "--metrics-addr", "127.0.0.1:0", "/locks/m", "--", "sh", "-c", gateScript(gate))
	addr := p.awaitLog("serving metrics")["addr"]
	p.awaitLog("lock acquired")
	resp, err := http.Get(fmt.Sprintf("http://%v/metrics", addr))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`zkrecipes_acquire_started_total{kind="lock",path="/locks/m"} 1`,
		`zkrecipes_acquire_duration_seconds_count{kind="lock",path="/locks/m",result="acquired"} 1`,
		`zkrecipes_sessions{state="CONNECTED"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	touch(t, gate)
	p.expect(0, 30*time.Second)
}

// TestMetricsEndpointOtherBackends: lock --metrics-addr serves the
// acquisition at /metrics on etcd, PostgreSQL and Redis too.
func TestMetricsEndpointOtherBackends(t *testing.T) {
	t.Parallel()
	for _, ls := range lockServers {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			url, addr := ls.start(t)
			checkMetricsEndpoint(t, url(addr), lockName(t), "--ttl", "5s")
		})
	}
}

// checkMetricsEndpoint runs lock with --metrics-addr (and flags) on name:
// while its command runs, /metrics shows the grant, and the lock held by
// this process with its command's token (zkrecipes_holding,
// zkrecipes_holding_token).
func checkMetricsEndpoint(t *testing.T, servers, name string, flags ...string) {
	t.Helper()
	dir := t.TempDir()
	gate, g := filepath.Join(dir, "gate"), filepath.Join(dir, "g")
	args := append(append([]string{"lock"}, flags...), "--metrics-addr", "127.0.0.1:0", name, "--", "sh", "-c", grantScript(g, gate))
	p := startOn(t, servers, dir, args...)
	maddr := p.awaitLog("serving metrics")["addr"]
	p.awaitLog("lock acquired")
	tok := readGrant(t, g).token
	resp, err := http.Get(fmt.Sprintf("http://%v/metrics", maddr))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`zkrecipes_acquire_duration_seconds_count{kind="lock",path=%q,result="acquired"} 1`, name),
		fmt.Sprintf(`zkrecipes_holding{kind="lock",path=%q} 1`, name),
		fmt.Sprintf(`zkrecipes_holding_token{kind="lock",path=%q} %s`, name, strconv.FormatFloat(float64(tok), 'g', -1, 64)),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(body), "zkrecipes_"))
		}
	}
	touch(t, gate)
	p.expect(0, 30*time.Second)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestElectOnceLost: with --once, a leadership lost while the command runs
// (an operator deletes the leader's node) stops the command and exits 79.
func TestElectOnceLost(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	p := start(t, cl, dir, "elect", "--once", "/elections/lost", "--id", "z", "--", "sh", "-c",
		fmt.Sprintf(`trap 'echo stopped >> %[1]s; exit 0' TERM; echo leading >> %[1]s; while :; do sleep 0.1; done`, log))
	p.awaitLog("leading")
	awaitFile(t, log)
	nodes := in.Children("/elections/lost")
	if len(nodes) != 1 {
		t.Fatalf("want the leader's node, got %q", nodes)
	}
	in.Delete("/elections/lost/" + nodes[0])
	p.expect(exitLost, 30*time.Second)
	if lines := readLines(t, log); strings.Join(lines, "|") != "leading|stopped" {
		t.Fatalf("the command was not stopped: %q", lines)
	}
}

// TestQuietByDefault (issue 14): inspect, a read-only query, prints its
// answer and nothing on stderr unless something fails; elect --help states
// --id's default once.
func TestQuietByDefault(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	a := start(t, cl, dir, "lock", "/locks/quiet", "--", "sh", "-c", gateScript(gate))
	a.awaitLog("lock acquired")
	cmd := exec.Command(bin, "inspect", "/locks/quiet")
	cmd.Env = append(os.Environ(), "ZK_SERVERS="+strings.Join(cl.Servers(), ","))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspect: %v\n%s", err, stderr.String())
	}
	if stderr.Len() != 0 || !strings.Contains(stdout.String(), "holder") {
		t.Fatalf("inspect printed on stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	}
	touch(t, gate)
	a.expect(0, 30*time.Second)

	h := start(t, nil, dir, "elect", "--help")
	h.expect(0, 30*time.Second)
	if out := h.stdout.String(); strings.Count(out, "(default host:pid)") != 1 || strings.Contains(out, `(default host:pid) (default`) {
		t.Fatalf("elect --help on --id:\n%s", out)
	}
}

// TestSignalIsNoLoss (issue 14): SIGTERM to zkrecipes while its command
// runs is forwarded to the command and logged at info level, whichever
// command or mode: plain elect (whose campaign loop ends on the signal)
// logged a false "ownership lost" warning.
func TestSignalIsNoLoss(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	for _, c := range []struct {
		mode []string
		exit int // plain elect: 128+signal; the others: the command's status
	}{
		{[]string{"elect", "/signal/elect", "--id", "a"}, 128 + int(syscall.SIGTERM)},
		{[]string{"elect", "--once", "/signal/once", "--id", "a"}, 0},
		{[]string{"lock", "/signal/lock"}, 0},
	} {
		mode := c.mode
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		script := fmt.Sprintf(`trap 'echo got TERM >> %[1]s; exit 0' TERM; echo started >> %[1]s; while :; do sleep 0.1; done`, log)
		p := start(t, cl, dir, append(mode, "--", "sh", "-c", script)...)
		awaitLines(t, log, 1) // the trap is set
		p.signal(syscall.SIGTERM)
		p.expect(c.exit, 30*time.Second)
		if lines := readLines(t, log); len(lines) != 2 || lines[1] != "got TERM" {
			t.Fatalf("%q: the command did not get the signal: %q", mode, lines)
		}
		if p.logged("signal received: forwarding it to the command") == nil {
			t.Errorf("%q: the forwarding is not logged:\n%s", mode, p.stderr)
		}
		for _, r := range p.logs() {
			if r["level"] == "WARN" || r["level"] == "ERROR" {
				t.Errorf("%q: a normal stop logged %v %q:\n%s", mode, r["level"], r["msg"], p.stderr)
			}
		}
	}
}

// TestInspectAtSequenceLimit: inspect of a lock whose directory's counter
// is stuck at its limit (docs/design.md#the-sequence-limit) lists the
// participants in creation order, with the first created as the only
// holder, though three of them have the same sequence 2147483647.
func TestInspectAtSequenceLimit(t *testing.T) {
	t.Parallel()
	const lock = "/limit/inspect"
	cl := zktest.Start(t, zktest.WithSeqCounters(map[string]int32{lock: math.MaxInt32 - 1}))
	zk := zktest.Inspect(t, cl)
	dir := t.TempDir()
	var gates []string
	for i := range 4 {
		gate := filepath.Join(dir, fmt.Sprintf("gate%d", i))
		gates = append(gates, gate)
		start(t, cl, dir, "lock", lock, "--", "sh", "-c", gateScript(gate))
		serverkit.Eventually(t, 20*time.Second, "the lock's node", func() bool { return len(zk.Children(lock)) == i+1 })
	}
	defer func() {
		for _, g := range gates {
			touch(t, g)
		}
	}()
	stuck := 0
	for _, c := range zk.Children(lock) {
		if strings.HasSuffix(c, "-2147483647") {
			stuck++
		}
	}
	if stuck != 3 {
		t.Fatalf("%d nodes with sequence 2147483647, want 3: %v", stuck, zk.Children(lock))
	}
	p := start(t, cl, dir, "inspect", "--json", lock)
	p.expect(0, 30*time.Second)
	var v View
	if err := json.Unmarshal([]byte(p.stdout.String()), &v); err != nil {
		t.Fatalf("inspect --json: %v: %s", err, p.stdout)
	}
	if v.Recipe != "mutex" || len(v.Participants) != 4 {
		t.Fatalf("view: %+v", v)
	}
	for i, e := range v.Participants {
		if want := map[bool]string{true: "holder", false: "waiting"}[i == 0]; e.Role != want {
			t.Fatalf("participant %d is %s, want %s: %+v", i, e.Role, want, v.Participants)
		}
		if i > 0 && e.Token <= v.Participants[i-1].Token {
			t.Fatalf("participants not in creation order: %+v", v.Participants)
		}
	}
	if !strings.HasSuffix(v.Participants[0].Node, "-2147483646") {
		t.Fatalf("holder %s, want the first node created (2147483646)", v.Participants[0].Node)
	}
}
