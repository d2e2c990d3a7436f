//go:build unix

package serverkit

import (
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting; the kernel drops
// it when f is closed or the process ends, however it ends.
func tryLock(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
