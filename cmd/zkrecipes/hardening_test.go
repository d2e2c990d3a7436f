package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/testkit/rtest/secrettest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Issue 23, finding 8: the command's environment, output of others' data,
// signals during --grace. ZooKeeper ACLs are in auth_test.go.

// TestChildEnvWithholdsSecrets: the command and the guard process get
// neither the server list (where a Redis or PostgreSQL password goes) nor
// ZK_AUTH, unless --pass-env names them; every other variable is passed,
// PGPASSWORD and PGSSLPASSWORD too (the lock is ZooKeeper's: they are the
// job's; TestDocPsqlJobPassword has a PostgreSQL lock, which withholds
// them). The guard process gets none. --pass-env of another name is a usage
// error, and no secret appears in zkrecipes' own log.
func TestChildEnvWithholdsSecrets(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	// With ZK_AUTH the lock's directories get the creator ACL: /env keeps
	// the world's, so that the test's cleanup can delete what is below.
	zktest.Inspect(t, cl).Create("/env", nil)
	dir := t.TempDir()
	secrets := map[string]string{
		"ZK_SERVERS":    strings.Join(cl.Servers(), ","),
		"ZK_AUTH":       "envuser:s3cr3t-zkr-zk-4711",
		"PGPASSWORD":    "s3cr3t-zkr-pg-4711",
		"PGSSLPASSWORD": "s3cr3t-zkr-pgssl-4711",
	}
	env := []string{"KEEP_ME=kept"}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	for i, c := range []struct {
		flags []string
		pass  []string
	}{
		{nil, nil},
		{[]string{"--pass-env", "PGPASSWORD,ZK_SERVERS"}, []string{"PGPASSWORD", "ZK_SERVERS"}},
	} {
		out, gate := filepath.Join(dir, fmt.Sprint("env", i)), filepath.Join(dir, fmt.Sprint("gate", i))
		args := append(append([]string{"lock"}, c.flags...), "/env/x", "--", "sh", "-c", "env > "+out+".tmp; mv "+out+".tmp "+out+"; "+gateScript(gate))
		p := startEnv(t, env, dir, false, args...)
		awaitFile(t, out)
		guard := guardEnv(t, p.cmd.Process.Pid)
		touch(t, gate)
		p.expect(0, 30*time.Second)
		got := map[string]string{}
		for _, kv := range readLines(t, out) {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		if got["KEEP_ME"] != "kept" || got["ZKRECIPES_TOKEN"] == "" {
			t.Errorf("%q: the command lacks KEEP_ME or its token: %q", c.flags, scrubbed(readLines(t, out), nil, env))
		}
		for k, v := range secrets {
			want := ""
			if strings.HasPrefix(k, "PG") {
				want = v
			}
			for _, n := range c.pass {
				if n == k {
					want = v
				}
			}
			if got[k] != want { // values not printed: they are test passwords
				t.Errorf("%q: the command's %s is set %v (the test's value %v), want it passed %v", c.flags, k, got[k] != "", got[k] == v, want != "")
			}
			if strings.Contains(guard, v) {
				t.Errorf("%q: the guard process has %s in its environment", c.flags, k)
			}
			if k != "ZK_SERVERS" && strings.Contains(p.stderr.String(), v) {
				t.Errorf("%q: zkrecipes logged %s (log not printed)", c.flags, k)
			}
		}
	}
	u := startEnv(t, env, dir, false, "lock", "--pass-env", "HOME", "/env/x", "--", "true")
	u.expect(exitUsage, 30*time.Second)
	if !strings.Contains(u.stderr.String(), `"HOME" is not withheld`) {
		t.Errorf("--pass-env HOME: %s", u.stderr)
	}
}

// guardEnv returns the environment of the guard process of zkrecipes pid
// (its child running "__guard").
func guardEnv(t *testing.T, pid int) string {
	t.Helper()
	var env string
	serverkit.Eventually(t, 10*time.Second, "the guard process", func() bool {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			stat, err := os.ReadFile(d + "/stat")
			cmdline, err2 := os.ReadFile(d + "/cmdline")
			if err != nil || err2 != nil || !strings.Contains(string(cmdline), guardArg) {
				continue
			}
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(pid) {
				b, err := os.ReadFile(d + "/environ")
				env = string(b)
				return err == nil
			}
		}
		return false
	})
	return env
}

// evilData holds what a terminal obeys: OSC (set the title), a colour
// (CSI), BEL, C1's CSI as UTF-8, DEL, a bidi override and isolate, a line
// break and a tab.
const evilData = "host:1\x1b]0;pwned\x07\x1b[31mred\u009b2J\x7f\u202eevil\u2066\n\tnext"

// TestForeignDataEscaped: a lock's holder and an election's leader wrote
// escape sequences into their nodes' data (as any participant can). inspect
// prints them escaped as text and as JSON that still decodes to the data;
// invalid UTF-8 is shown in hex; lock's "held elsewhere" line names the
// holder escaped in both log formats.
func TestForeignDataEscaped(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := zookeeper.Connect(ctx, cl.Servers())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := mutex.New(s, "/evil/lock", mutex.WithData([]byte(evilData)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := election.New(s, "/evil/elect")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, []byte("bad\x9b\xffutf8")); err != nil {
		t.Fatal(err)
	}

	text := start(t, cl, dir, "inspect", "/evil/lock")
	text.expect(0, 30*time.Second)
	assertTermSafe(t, "inspect", text.stdout.String())
	if !strings.Contains(text.stdout.String(), strconv.Quote(evilData)) {
		t.Errorf("inspect does not show the data quoted:\n%s", text.stdout)
	}
	js := start(t, cl, dir, "inspect", "--json", "/evil/lock")
	js.expect(0, 30*time.Second)
	assertTermSafe(t, "inspect --json", js.stdout.String())
	var v View
	if err := json.Unmarshal([]byte(js.stdout.String()), &v); err != nil || len(v.Participants) != 1 || v.Participants[0].Data != evilData {
		t.Errorf("inspect --json does not decode to the data (%v): %+v", err, v)
	}
	el := start(t, cl, dir, "inspect", "/evil/elect")
	el.expect(0, 30*time.Second)
	if out := el.stdout.String(); !strings.Contains(out, fmt.Sprintf("%x", "bad\x9b\xffutf8")) {
		t.Errorf("invalid UTF-8 is not shown in hex:\n%s", out)
	}
	for _, format := range []string{"json", "text"} {
		p := start(t, cl, dir, "lock", "--log-format", format, "--wait", "0", "/evil/lock", "--", "true")
		p.expect(exitHeld, 30*time.Second)
		assertTermSafe(t, "lock's log in "+format, p.stderr.String())
		if format == "json" && p.logged("held elsewhere")["holder"] != evilData {
			t.Errorf("the JSON log does not decode to the holder's data:\n%s", p.stderr)
		}
	}
}

// assertTermSafe fails the test if out has anything a terminal would obey
// or misplace: invalid UTF-8, or a rune that is not printable other than a
// line break.
func assertTermSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 in %q", what, out)
	}
	for _, r := range out {
		if r != '\n' && !strconv.IsPrint(r) {
			t.Errorf("%s: unescaped %U in:\n%q", what, r, out)
			return
		}
	}
}

// TestSignalDuringGraceKills: ownership is lost and the command, which
// ignores SIGTERM, is given a long --grace; SIGTERM to zkrecipes meanwhile
// kills its group at once (it was ignored until the grace period ended),
// for lock and for elect. A second signal after a forwarded one does too.
func TestSignalDuringGraceKills(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for i, c := range []struct {
		args []string
		path string
		exit int
		lose bool // lose ownership first (else: the first signal is forwarded)
	}{
		{[]string{"lock"}, "/grace/lock", exitLost, true},
		{[]string{"elect", "--id", "a"}, "/grace/elect", 128 + int(syscall.SIGTERM), true},
		{[]string{"lock"}, "/grace/twice", 128 + int(syscall.SIGKILL), false},
	} {
		dir := t.TempDir()
		pid := filepath.Join(dir, "pid")
		args := append(append(c.args, "--grace", "120s", c.path, "--"), "sh", "-c",
			fmt.Sprintf(`trap '' TERM; echo $$ > %s; while :; do sleep 0.1; done`, pid))
		p := start(t, cl, dir, args...)
		child := readPid(t, pid)
		if c.lose {
			nodes := in.Children(c.path)
			if len(nodes) != 1 {
				t.Fatalf("%d: want one node, got %q", i, nodes)
			}
			in.Delete(c.path + "/" + nodes[0])
		} else {
			p.signal(syscall.SIGTERM)
		}
		p.awaitLog("stopping the command")
		p.signal(syscall.SIGTERM)
		p.expect(c.exit, 20*time.Second)
		if p.logged("signal received while the command was stopping: SIGKILL") == nil {
			t.Errorf("%q: no SIGKILL on the signal:\n%s", c.args, p.stderr)
		}
		if alive(child) {
			t.Errorf("%q: the command (pid %d) still exists", c.args, child)
		}
	}
}

// TestScrubbedArgs: a failed run's arguments and log, as the tests print
// them, hold no password of a --servers URL or of ZK_SERVERS.
func TestScrubbedArgs(t *testing.T) {
	args := []string{"lock", "--servers", "redis://:s3cr3t-zkr-arg-pw@127.0.0.1:1", "--servers=postgres://u:s3cr3t-zkr-eq-pw@h/db?sslmode=disable", "/x"}
	env := []string{"ZK_SERVERS=etcd://u:s3cr3t-zkr-env-pw@127.0.0.1:2/p"}
	got := fmt.Sprintf("%q", scrubbed(append(args, "log: s3cr3t-zkr-env-pw"), args, env))
	secrettest.Absent(t, "the scrubbed arguments", got)
	if !strings.Contains(got, "127.0.0.1:1") || !strings.Contains(got, "/x") {
		t.Errorf("scrubbed took out more than the passwords: %s", got)
	}
}
