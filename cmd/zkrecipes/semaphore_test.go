package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestLockSemaphoreStoredLimit: lock --semaphore N stores N with the
// directory; a later --semaphore with another N is refused (64) without
// running its command, and the same N is granted.
func TestLockSemaphoreStoredLimit(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	start(t, cl, dir, "lock", "--semaphore", "2", "/locks/sem-stored", "--", "true").expect(0, 30*time.Second)
	p := start(t, cl, dir, "lock", "--semaphore", "3", "/locks/sem-stored", "--", "touch", dir+"/ran")
	p.expect(exitUsage, 30*time.Second)
	if !strings.Contains(p.stderr.String(), "stores limit 2") {
		t.Errorf("stderr does not say the stored limit:\n%s", p.stderr)
	}
	start(t, cl, dir, "lock", "--semaphore", "2", "/locks/sem-stored", "--", "true").expect(0, 30*time.Second)
}

// TestInspectReadsTheStoredLimit: inspect tells a semaphore's holders from
// its waiters by the limit lock --semaphore stored, without --semaphore.
func TestInspectReadsTheStoredLimit(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	for i := range 3 {
		p := start(t, cl, dir, "lock", "--semaphore", "2", "/locks/sem-inspect", "--", "sh", "-c", gateScript(gate))
		if i < 2 {
			p.awaitLog("lock acquired")
		} else {
			p.awaitLog("acquiring the lock")
		}
	}
	serverkit.Eventually(t, 20*time.Second, "three nodes", func() bool {
		return len(zktest.Inspect(t, cl).Children("/locks/sem-inspect")) == 3
	})
	in := start(t, cl, dir, "inspect", "--json", "/locks/sem-inspect")
	in.expect(0, 30*time.Second)
	var v View
	if err := json.Unmarshal([]byte(in.stdout.String()), &v); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, in.stdout)
	}
	var roles []string
	for _, p := range v.Participants {
		roles = append(roles, p.Role)
	}
	if v.Recipe != "semaphore" || strings.Join(roles, ",") != "holder,holder,waiting" {
		t.Fatalf("inspect: recipe %q, roles %v; want semaphore: holder, holder, waiting", v.Recipe, roles)
	}
	touch(t, gate)
}
