package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestLockDelayKilledHolder: on every backend, a holder run with
// --lock-delay is killed with SIGKILL (no Release: its lease ends only
// when the server frees it); the next zkrecipes lock runs its command no
// sooner than the delay after the kill, with the delay served in its log
// (unless, on Redis, which counts the delay from the key's expiry, it began
// to acquire after the delay's latest end: started late by a loaded
// machine, 4.4 s after the kill in one make test at -p 4).
// After a holder whose command finished (a clean Release), the next runs
// at once.
func TestLockDelayKilledHolder(t *testing.T) {
	t.Parallel()
	const delay, ttl = 2 * time.Second, 2 * time.Second // ttl: the holder's session timeout or lease
	servers := map[string]func(t *testing.T) (string, []string){
		"ZooKeeper": func(t *testing.T) (string, []string) {
			return strings.Join(zktest.Shared(t).Servers(), ","), []string{"--session-timeout", "2s"}
		},
	}
	for _, ls := range lockServers {
		servers[ls.name] = func(t *testing.T) (string, []string) {
			url, addr := ls.start(t)
			return url(addr), []string{"--ttl", "2s"}
		}
	}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, lease := start(t)
			path, dir := lockName(t), t.TempDir()
			args := func(script string) []string {
				a := append([]string{"lock"}, lease...)
				return append(a, "--lock-delay", delay.String(), path, "--", "sh", "-c", script)
			}
			g1, g2, g3 := filepath.Join(dir, "g1"), filepath.Join(dir, "g2"), filepath.Join(dir, "g3")

			holder := startOn(t, srv, dir, args(grantScript(g1, filepath.Join(dir, "never")))...)
			readGrant(t, g1)
			killed := time.Now()
			if err := holder.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			next := startOn(t, srv, dir, args(grantScript(g2, ""))...)
			readGrant(t, g2)
			after := time.Since(killed)
			t.Logf("the next holder ran %v after the kill (delay %v)", after.Round(time.Millisecond), delay)
			if after < delay {
				t.Errorf("the next holder ran %v after the holder was killed, sooner than --lock-delay %v", after, delay)
			}
			next.expect(0, 30*time.Second)
			if r := next.logged("lock acquired"); (r == nil || r["lock_delay"] == nil) && !servedBefore(t, name, next, killed.Add(ttl+delay)) {
				t.Errorf("the grant's log line does not say the lock-delay served: %v", r)
			}

			// After a clean release no delay is served: read from the grant's
			// log line, not from the wall clock (a loaded machine can take
			// seconds to start the process).
			third := startOn(t, srv, dir, args(grantScript(g3, ""))...)
			third.expect(0, 30*time.Second)
			if r := third.logged("lock acquired"); r == nil || r["lock_delay"] != nil {
				t.Errorf("after a clean release the grant's log line says a lock-delay was served: %v", r)
			}
			_ = os.Remove(g3)
		})
	}
}

// servedBefore reports whether the lock-delay of backend was over before
// the contender p began to acquire, end being the latest it can end: Redis
// counts it from the holder's end on the server (its key's expiry, at most
// the lease after the kill), so a contender that a loaded machine started
// after end finds it served (docs/lock-delay.md); the others count it
// from a contender's first sight of the end, and one that comes late
// serves it whole.
func servedBefore(t *testing.T, backend string, p *proc, end time.Time) bool {
	t.Helper()
	r := p.logged("acquiring the lock")
	if backend != "Redis" || r == nil {
		return false
	}
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
	if err != nil {
		t.Fatalf("the log line's time: %v", err)
	}
	return at.After(end)
}

// TestLockDelayBadFlag: a --lock-delay out of range, or with a lock of
// several holders, is a usage error before anything connects.
func TestLockDelayBadFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--lock-delay", "-1s"},
		{"--lock-delay", "11m"},
		{"--lock-delay", "1s", "--rw", "read"},
		{"--lock-delay", "1s", "--semaphore", "2"},
	} {
		a := append(append([]string{"lock"}, args...), "/cli-test/bad-delay", "--", "true")
		p := startOn(t, "127.0.0.1:1", dir, a...)
		p.expect(exitUsage, 30*time.Second)
		if !strings.Contains(p.stderr.String(), "--lock-delay") {
			t.Errorf("%q: the usage error does not name --lock-delay:\n%s", args, p.stderr)
		}
	}
}

// TestLockDelayCommandKilled: a command that ends by a signal (here it
// kills itself) may leave requests in flight: with --lock-delay, lock
// keeps the lock that long before its Release, so the next holder runs no
// sooner than the delay after the command died. A command that exits
// normally is released at once (TestLockDelayKilledHolder's last step).
func TestLockDelayCommandKilled(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	srv := strings.Join(zktest.Shared(t).Servers(), ",")
	path, dir := lockName(t), t.TempDir()
	died := filepath.Join(dir, "died")
	g2 := filepath.Join(dir, "g2")
	holder := startOn(t, srv, dir, "lock", "--lock-delay", delay.String(), path, "--",
		"sh", "-c", "touch "+died+"; kill -9 $$")
	awaitFile(t, died)
	// The command's last act before it died: the file's time, not when
	// the poll saw it (up to a poll later, which a fast hand-off after the
	// delay made look like a grant too soon).
	fi, err := os.Stat(died)
	if err != nil {
		t.Fatal(err)
	}
	dead := fi.ModTime()
	next := startOn(t, srv, dir, "lock", "--lock-delay", delay.String(), path, "--", "sh", "-c", grantScript(g2, ""))
	readGrant(t, g2)
	if after := time.Since(dead); after < delay {
		t.Errorf("the next holder ran %v after the command was killed, sooner than --lock-delay %v", after, delay)
	}
	holder.expect(128+9, 30*time.Second)
	next.expect(0, 30*time.Second)
	if holder.logged("the command ended by a signal: keeping the lock for the lock-delay before releasing it, so that its requests in flight land first") == nil {
		t.Errorf("the holder's log does not say it kept the lock for the delay")
	}
}
