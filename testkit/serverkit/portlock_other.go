//go:build !unix

package serverkit

import "os"

// tryLock has no cross-process lock to take here: FreePorts reserves
// within this process only.
func tryLock(*os.File) bool { return true }
