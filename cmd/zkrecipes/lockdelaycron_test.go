package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestLockDelayCronZooKeeper: after a holder run with --lock-delay is
// killed, a cron job (`lock --wait 0`, a new process every run) exits 75
// while the delay is served and runs its command once it has passed: the
// delay's start is kept on the server, so a new process does not restart
// it.
func TestLockDelayCronZooKeeper(t *testing.T) {
	t.Parallel()
	const delay, timeout = 2 * time.Second, 2 * time.Second
	srv := strings.Join(zktest.Shared(t).Servers(), ",")
	path, dir := lockName(t), t.TempDir()
	args := func(script string) []string {
		return []string{"lock", "--session-timeout", timeout.String(), "--lock-delay", delay.String(), "--wait", "0", path, "--", "sh", "-c", script}
	}
	g1 := filepath.Join(dir, "g1")
	holder := startOn(t, srv, dir, args(grantScript(g1, filepath.Join(dir, "never")))...)
	readGrant(t, g1)
	killed := time.Now()
	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := killed.Add(timeout + delay + 10*time.Second)
	for runs := 1; ; runs++ {
		if time.Now().After(deadline) {
			t.Fatalf("no `lock --wait 0` run got the lock within %v of the kill (%d runs): each new process restarted the lock-delay", deadline.Sub(killed), runs-1)
		}
		p := startOn(t, srv, dir, args("true")...)
		code := p.wait(30 * time.Second)
		if code == 75 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if code != 0 {
			t.Fatalf("run %d exited %d, want 75 (locked) or 0; log:\n%s", runs, code, p.stderr)
		}
		after := time.Since(killed)
		t.Logf("run %d got the lock %v after the kill (session timeout %v, delay %v)", runs, after.Round(time.Millisecond), timeout, delay)
		if after < delay {
			t.Errorf("run %d got the lock %v after the holder was killed, sooner than --lock-delay %v", runs, after, delay)
		}
		return
	}
}
