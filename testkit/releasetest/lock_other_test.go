//go:build !unix

package releasetest

import "testing"

// lockModCache does nothing where flock is missing: concurrent runs of the
// test on one machine are not supported there.
func lockModCache(t *testing.T, modcache string) {}
