package main

import (
	"strings"
	"testing"
	"time"

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
