//go:build unix

package releasetest

import (
	"os"
	"syscall"
	"testing"
)

// lockModCache holds an exclusive flock on the module cache's directory
// until the test ends: runs of this test (several people's, on one
// machine) take turns, so that one's cleanup never removes what another
// one, publishing the same tree at the same version, is using. The go
// command locks files inside the cache, never the directory itself.
func lockModCache(t *testing.T, modcache string) {
	d, err := os.Open(modcache)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		d.Close()
		t.Fatalf("locking %s: %v", modcache, err)
	}
	t.Cleanup(func() { d.Close() }) // closing releases the lock
}
