package main

import (
	"fmt"
	"os"
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

// TestLockRunsCommandsOneAfterAnother: three lock processes on one path run
// their commands strictly one after another (every start is followed by
// the same command's end), each command sees a larger token than the one
// before, and each process exits with its command's status.
func TestLockRunsCommandsOneAfterAnother(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := fmt.Sprintf(`echo "start $ZKRECIPES_TOKEN" >> %[1]s; sleep 0.3; echo "end $ZKRECIPES_TOKEN" >> %[1]s; exit 7`, log)
	var ps []*proc
	for range 3 {
		ps = append(ps, start(t, cl, dir, "lock", "/jobs/serial", "--", "sh", "-c", script))
	}
	for _, p := range ps {
		p.expect(7, 60*time.Second)
	}
	lines := readLines(t, log)
	if len(lines) != 6 {
		t.Fatalf("want 3 starts and 3 ends, got %q", lines)
	}
	var prev uint64
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if s[0] != "start" || e[0] != "end" || s[1] != e[1] {
			t.Fatalf("commands overlapped: %q", lines)
		}
		tok, err := strconv.ParseUint(s[1], 10, 64)
		if err != nil || tok <= prev {
			t.Fatalf("token %q after %d: not larger (%v); all: %q", s[1], prev, err, lines)
		}
		prev = tok
	}
	if n := zktest.Inspect(t, cl).Children("/jobs/serial"); len(n) != 0 {
		t.Fatalf("left behind: %q", n)
	}
}

// TestLockCronSingleton: while one process holds the lock, --wait 0 exits
// 75 at once without running its command (logging the holder at INFO, so
// nothing at --log-level warn), and so does --wait 300ms after waiting;
// once the holder is done, --wait 0 gets the lock.
func TestLockCronSingleton(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate, ran := filepath.Join(dir, "gate"), filepath.Join(dir, "ran")
	holder := start(t, cl, dir, "lock", "/cron/nightly", "--", "sh", "-c", gateScript(gate))
	holder.awaitLog("lock acquired")

	// The refusal names the holder, at INFO: on a cron singleton it is
	// routine on every machine but one (issue 24).
	refused := start(t, cl, dir, "lock", "--wait", "0", "/cron/nightly", "--", "touch", ran)
	refused.expect(exitHeld, 30*time.Second)
	if r := refused.logged("held elsewhere"); r == nil || r["holder"] != fmt.Sprintf("%s:%d", hostname(t), holder.cmd.Process.Pid) || r["level"] != "INFO" {
		t.Fatalf("the refusal is not an INFO line naming the holder: %v\n%s", r, refused.stderr)
	}
	// At --log-level warn (the crontab lines of README.md and docs/cli.md,
	// run verbatim by TestCrontabLines) a refused run writes nothing, so
	// cron mails nothing.
	quiet := start(t, cl, dir, "lock", "--log-level", "warn", "--wait", "0", "/cron/nightly", "--", "touch", ran)
	quiet.expect(exitHeld, 30*time.Second)
	if out := quiet.stderr.String(); out != "" {
		t.Errorf("a refused run at --log-level warn wrote:\n%s", out)
	}
	// Durations in the JSON logs are Go's ("12ms"), not bare nanoseconds.
	if w, ok := refused.logged("held elsewhere")["waited"].(string); !ok {
		t.Errorf("waited is not a duration: %v", refused.logged("held elsewhere")["waited"])
	} else if _, err := time.ParseDuration(w); err != nil {
		t.Errorf("waited %q: %v", w, err)
	}
	start(t, cl, dir, "lock", "--wait", "300ms", "/cron/nightly", "--", "touch", ran).expect(exitHeld, 30*time.Second)
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a command ran while the lock was held elsewhere")
	}
	touch(t, gate)
	holder.expect(0, 30*time.Second)
	start(t, cl, dir, "lock", "--wait", "0", "/cron/nightly", "--", "touch", ran).expect(0, 30*time.Second)
	awaitFile(t, ran)
}

// TestLockHolderFrozenPastSessionTimeout is the scenario: the
// holder process (zkrecipes, not its command) is frozen with SIGSTOP past
// the session timeout; its session expires and another process acquires
// with a larger token. When the holder resumes, it finds its ownership
// lost, terminates its command (SIGTERM) and exits 79.
func TestLockHolderFrozenPastSessionTimeout(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	log, pidA := filepath.Join(dir, "log"), filepath.Join(dir, "pidA")
	scriptA := fmt.Sprintf(`trap 'echo "A terminated" >> %[1]s; exit 0' TERM; echo $$ > %[2]s; echo "A $ZKRECIPES_TOKEN" >> %[1]s; while :; do sleep 0.1; done`, log, pidA)
	a := start(t, cl, dir, "lock", "--session-timeout", "2s", "--grace", "5s", "/locks/frozen", "--", "sh", "-c", scriptA)
	a.awaitLog("lock acquired")
	childA := readPid(t, pidA)

	b := start(t, cl, dir, "lock", "--session-timeout", "2s", "/locks/frozen", "--", "sh", "-c", fmt.Sprintf(`echo "B $ZKRECIPES_TOKEN" >> %s`, log))
	b.awaitLog("session connected") // B is connected and about to queue
	a.signal(syscall.SIGSTOP)
	b.expect(0, 30*time.Second) // A's session expired: B got the lock and ran
	a.signal(syscall.SIGCONT)
	a.expect(exitLost, 30*time.Second)
	// On resuming, A counts the silence from its last server reply: it
	// gives ownership up at once, whichever of its checks fires first.
	if r := a.logged("ownership lost; the command was stopped"); r == nil ||
		!regexp.MustCompile(`connection suspended|session lost`).MatchString(fmt.Sprint(r["cause"])) {
		t.Fatalf("A's loss has no suspension or session-loss cause: %v", r)
	}

	lines := readLines(t, log)
	var tokA, tokB uint64
	terminated := false
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case l == "A terminated":
			terminated = true
		case f[0] == "A":
			tokA, _ = strconv.ParseUint(f[1], 10, 64)
		case f[0] == "B":
			tokB, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	if !terminated {
		t.Fatalf("A's command was not terminated by SIGTERM: %q", lines)
	}
	if tokA == 0 || tokB <= tokA {
		t.Fatalf("B's token %d is not larger than A's %d: %q", tokB, tokA, lines)
	}
	if alive(childA) {
		t.Fatalf("A's command (pid %d) still exists", childA)
	}
}

// TestLockNodeDeletedKillsAfterGrace: an operator deletes the lock node;
// the command ignores SIGTERM, so it is killed with SIGKILL after --grace,
// and zkrecipes exits 79.
func TestLockNodeDeletedKillsAfterGrace(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	dir := t.TempDir()
	pid := filepath.Join(dir, "pid")
	a := start(t, cl, dir, "lock", "--grace", "300ms", "/locks/deleted", "--", "sh", "-c",
		fmt.Sprintf(`trap '' TERM; echo $$ > %s; while :; do sleep 0.1; done`, pid))
	a.awaitLog("lock acquired")
	child := readPid(t, pid)
	nodes := in.Children("/locks/deleted")
	if len(nodes) != 1 {
		t.Fatalf("want the holder's node, got %q", nodes)
	}
	in.Delete("/locks/deleted/" + nodes[0])
	a.expect(exitLost, 30*time.Second)
	if a.logged("the command outlived its grace period: SIGKILL") == nil {
		t.Fatalf("no SIGKILL after the grace period; log:\n%s", a.stderr)
	}
	if r := a.logged("ownership lost; the command was stopped"); r == nil || !strings.Contains(fmt.Sprint(r["cause"]), "deleted") {
		t.Fatalf("the loss's cause is not the deletion: %v", r)
	}
	if alive(child) {
		t.Fatalf("the command (pid %d) still exists", child)
	}
}

// TestLockForwardsSignals: SIGTERM to zkrecipes reaches the command (which
// exits 5 from its trap), the lock is released, and zkrecipes exits 5.
func TestLockForwardsSignals(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	a := start(t, cl, dir, "lock", "/locks/signalled", "--", "sh", "-c",
		fmt.Sprintf(`trap 'echo got TERM >> %[1]s; exit 5' TERM; echo started >> %[1]s; while :; do sleep 0.1; done`, log))
	a.awaitLog("lock acquired")
	awaitFile(t, log)
	a.signal(syscall.SIGTERM)
	a.expect(5, 30*time.Second)
	if lines := readLines(t, log); strings.Join(lines, "|") != "started|got TERM" {
		t.Fatalf("the command did not get SIGTERM: %q", lines)
	}
	if n := in.Children("/locks/signalled"); len(n) != 0 {
		t.Fatalf("the lock was not released: %q", n)
	}
}

// TestLockReadWriteAndSemaphore: two readers hold at once while a writer
// with --wait 0 is refused; a semaphore of 2 admits two holders and
// refuses a third.
func TestLockReadWriteAndSemaphore(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	var holders []*proc
	for _, args := range [][]string{
		{"--rw", "read", "/locks/rw"}, {"--rw", "read", "/locks/rw"},
		{"--semaphore", "2", "/locks/sem"}, {"--semaphore", "2", "/locks/sem"},
	} {
		p := start(t, cl, dir, append(append([]string{"lock"}, args...), "--", "sh", "-c", gateScript(gate))...)
		p.awaitLog("lock acquired") // both readers, both leases: at the same time
		holders = append(holders, p)
	}
	start(t, cl, dir, "lock", "--rw", "write", "--wait", "0", "/locks/rw", "--", "true").expect(exitHeld, 30*time.Second)
	start(t, cl, dir, "lock", "--semaphore", "2", "--wait", "0", "/locks/sem", "--", "true").expect(exitHeld, 30*time.Second)
	touch(t, gate)
	for _, p := range holders {
		p.expect(0, 30*time.Second)
	}
	start(t, cl, dir, "lock", "--rw", "write", "--wait", "0", "/locks/rw", "--", "true").expect(0, 30*time.Second)
}

// TestUsageErrors: bad flags and arguments exit 64 with a message naming
// the problem, before any connection; --help prints examples and exits 0.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "locks/x", "--", "true"}, `invalid path "locks/x": not absolute`},
		{[]string{"lock", "/locks/x/", "--", "true"}, `invalid path "/locks/x/": trailing slash`},
		{[]string{"lock", "/zookeeper/x", "--", "true"}, `reserved`},
		{[]string{"lock", "/locks/x"}, "no command"},
		{[]string{"lock", "--", "true"}, "want exactly one PATH"},
		{[]string{"lock", "--rw", "both", "/locks/x", "--", "true"}, `--rw "both"`},
		{[]string{"lock", "--semaphore", "2", "--rw", "read", "/locks/x", "--", "true"}, "exclude each other"},
		{[]string{"lock", "--bogus", "/locks/x", "--", "true"}, "flag provided but not defined: -bogus"},
		{[]string{"lock", "--log-format", "xml", "/locks/x", "--", "true"}, `--log-format "xml"`},
		{[]string{"lock", "--tolerate-suspension", "2", "/locks/x", "--", "true"}, "--tolerate-suspension 2"},
		{[]string{"lock", "--servers", "127.0.0.1:notaport", "/locks/x", "--", "true"}, "is not host:port"},
		{[]string{"lock", "--semaphore", "0", "/locks/x", "--", "true"}, "--semaphore 0"},
		{[]string{"lock", "--servers", "127.0.0.1:2181,,", "/locks/x", "--", "true"}, "an empty server address"},
		{[]string{"elect", "/e", "--", "true"}, ""}, // valid: checked below with no servers
		{[]string{"inspect", "a", "b"}, "want exactly one PATH"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		if c.want == "" {
			continue
		}
		p := start(t, cl, dir, c.args...)
		p.expect(exitUsage, 30*time.Second)
		if !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("zkrecipes %q: stderr lacks %q:\n%s", c.args, c.want, p.stderr)
		}
	}
	// No servers anywhere.
	p := start(t, nil, dir, "elect", "/e", "--", "true")
	p.expect(exitUsage, 30*time.Second)
	if !strings.Contains(p.stderr.String(), "set --servers or ZK_SERVERS") {
		t.Errorf("no servers: %s", p.stderr)
	}
	for _, cmd := range []string{"lock", "elect", "inspect"} {
		h := start(t, nil, dir, cmd, "--help")
		h.expect(0, 30*time.Second)
		if out := h.stdout.String(); !strings.Contains(out, "Examples:") || !strings.Contains(out, "-servers") {
			t.Errorf("%s --help lacks examples or flags:\n%s", cmd, out)
		}
	}
}

// TestUnreachable: a server that does not answer is reported within the
// connect timeout, with exit status 69.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, nil, dir, "lock", "--servers", "127.0.0.1:1", "--connect-timeout", "500ms", "/locks/x", "--", "true")
	p.expect(exitUnavailable, 30*time.Second)
	if r := p.logged("cannot connect to ZooKeeper"); r == nil || !strings.Contains(fmt.Sprint(r["err"]), "unreachable") {
		t.Fatalf("no clear error:\n%s", p.stderr)
	}
}

// TestUnreachableSaysWhy (issue 14): a wrong port is answered about a
// second after the refusal, not at the end of --connect-timeout, and the
// error says what the dial met; a server given without a port gets 2181,
// and zkrecipes says so.
func TestUnreachableSaysWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	begin := time.Now()
	p := start(t, nil, dir, "lock", "--servers", "127.0.0.1:1", "--connect-timeout", "60s", "/locks/x", "--", "true")
	p.expect(exitUnavailable, 50*time.Second)
	if d := time.Since(begin); d > 30*time.Second {
		t.Errorf("a refused connection took %v to report (--connect-timeout 60s)", d)
	}
	if r := p.logged("cannot connect to ZooKeeper"); r == nil || !strings.Contains(fmt.Sprint(r["err"]), "connection refused") {
		t.Errorf("the error does not say the connection was refused:\n%s", p.stderr)
	}
	q := start(t, nil, dir, "inspect", "--servers", "127.0.0.1", "--connect-timeout", "1s", "/locks/x")
	q.wait(30 * time.Second)
	if r := q.logged("no port given: using ZooKeeper's default port"); r == nil || fmt.Sprint(r["port"]) != "2181" {
		t.Errorf("a server without a port is not reported:\n%s", q.stderr)
	}
}

// TestCommandNotFound: a command that cannot be started gives the shell's
// 127, and the lock or leadership is given up (nothing is left behind).
func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	start(t, cl, dir, "lock", "/locks/nf", "--", "./no-such-command").expect(127, 30*time.Second)
	start(t, cl, dir, "elect", "/elections/nf", "--", "./no-such-command").expect(127, 30*time.Second)
	start(t, cl, dir, "elect", "--once", "/elections/nf", "--", "./no-such-command").expect(127, 30*time.Second)
	in := zktest.Inspect(t, cl)
	if n := append(in.Children("/locks/nf"), in.Children("/elections/nf")...); len(n) != 0 {
		t.Fatalf("left behind: %q", n)
	}
}

// TestLockWaiterFrozenQueuesAgain: a waiter frozen past its session
// timeout loses its place with its session; when it resumes it queues
// again on a new session (instead of exiting 69) and runs its command once
// the holder is done.
func TestLockWaiterFrozenQueuesAgain(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	dir := t.TempDir()
	gate, ran := filepath.Join(dir, "gate"), filepath.Join(dir, "ran")
	a := start(t, cl, dir, "lock", "/locks/waiter", "--", "sh", "-c", gateScript(gate))
	a.awaitLog("lock acquired")
	b := start(t, cl, dir, "lock", "--session-timeout", "2s", "/locks/waiter", "--", "touch", ran)
	serverkit.Eventually(t, 20*time.Second, "b queued", func() bool { return len(in.Children("/locks/waiter")) == 2 })
	b.signal(syscall.SIGSTOP)
	serverkit.Eventually(t, 20*time.Second, "b's node gone with its session", func() bool {
		return len(in.Children("/locks/waiter")) == 1
	})
	b.signal(syscall.SIGCONT)
	// Usually B was waiting: Acquire fails with ErrSessionLost and zkrecipes
	// queues again. If B was frozen before it read its create's reply, the
	// engine itself creates again on the new session. Either way:
	serverkit.Eventually(t, 20*time.Second, "b queued again", func() bool { return len(in.Children("/locks/waiter")) == 2 })
	touch(t, gate)
	a.expect(0, 30*time.Second)
	b.expect(0, 30*time.Second)
	awaitFile(t, ran)
}

// TestLockKilledTakesTheCommandsGroup: zkrecipes is killed with SIGKILL
// while its command runs a grandchild (a job script's real work): the guard
// process kills the command's whole process group, so nothing keeps working
// without the lock (the kernel's parent-death signal would reach only the
// direct child). Likewise, what a command leaves running when it exits
// normally is killed before the lock is released.
func TestLockKilledTakesTheCommandsGroup(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	pid := filepath.Join(dir, "pid")
	a := start(t, cl, dir, "lock", "/locks/killed", "--", "sh", "-c",
		fmt.Sprintf(`sleep 60 & echo $! > %s; wait`, pid))
	a.awaitLog("lock acquired")
	grandchild := readPid(t, pid)
	a.signal(syscall.SIGKILL)
	a.wait(10 * time.Second)
	serverkit.Eventually(t, 10*time.Second, "the grandchild killed with zkrecipes", func() bool { return !running(grandchild) })

	left := filepath.Join(dir, "left")
	b := start(t, cl, dir, "lock", "/locks/killed-left", "--", "sh", "-c",
		fmt.Sprintf(`sleep 60 & echo $! > %s`, left))
	b.expect(0, 30*time.Second)
	leftover := readPid(t, left)
	serverkit.Eventually(t, 10*time.Second, "a leftover of a finished command killed", func() bool { return !running(leftover) })
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestLockRefusesAnotherModeOnThePath: a plain lock holds the path; a
// --rw write lock (or a semaphore) on the same path would ignore its node
// and run beside it, so it is refused with the usage status and runs
// nothing.
func TestLockRefusesAnotherModeOnThePath(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	a := start(t, cl, dir, "lock", "/locks/modes", "--", "sh", "-c", gateScript(gate))
	a.awaitLog("lock acquired")
	ran := filepath.Join(dir, "ran")
	for _, mode := range [][]string{{"--rw", "write"}, {"--semaphore", "2"}} {
		args := append(append([]string{"lock", "--wait", "0"}, mode...), "/locks/modes", "--", "touch", ran)
		b := start(t, cl, dir, args...)
		b.expect(exitUsage, 30*time.Second)
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%v ran its command beside the plain lock's holder", mode)
		}
	}
	touch(t, gate)
	a.expect(0, 30*time.Second)
}

// TestElectRefusesALockedPath (issue 14): a path held by a lock is refused
// by elect as by lock, with the usage status and the same message, and
// elect runs nothing: with --once (which exited 70) and without (which
// campaigned again, with a warning every few seconds, for ever).
func TestElectRefusesALockedPath(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate, ran := filepath.Join(dir, "gate"), filepath.Join(dir, "ran")
	a := start(t, cl, dir, "lock", "/locks/elect-here", "--", "sh", "-c", gateScript(gate))
	a.awaitLog("lock acquired")
	for _, args := range [][]string{
		{"elect", "--once", "/locks/elect-here", "--", "touch", ran},
		{"elect", "/locks/elect-here", "--", "touch", ran},
		{"lock", "--semaphore", "2", "/locks/elect-here", "--", "touch", ran},
	} {
		p := start(t, cl, dir, args...)
		p.expect(exitUsage, 30*time.Second)
		if p.logged("the path is in use by another recipe (a lock of another mode, an election or a latch): use one recipe and mode per path") == nil {
			t.Errorf("zkrecipes %q: no clear message:\n%s", args, p.stderr)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a command ran beside the lock's holder")
	}
	touch(t, gate)
	a.expect(0, 30*time.Second)
}
