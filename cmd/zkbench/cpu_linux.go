package main

import (
	"syscall"
	"time"
	"unsafe"
)

// processCPU returns the CPU time, user + system over all threads, that
// process pid has used so far. It reads the process's CPU-time clock with
// clock_gettime (the clock id is (^pid)<<3 | 2, as glibc's
// clock_getcpuclockid makes it), which Linux lets any process read: the
// same total as utime + stime in /proc/<pid>/stat, in nanoseconds rather
// than 10 ms clock ticks, so that short phases (a few hand-offs) still
// measure something. The error is the system call's (ESRCH: no such
// process).
func processCPU(pid int) (time.Duration, error) {
	if pid <= 0 || pid >= 1<<28 { // the clock id is 32 bits
		return 0, syscall.ESRCH
	}
	clock := uintptr((^pid)<<3 | 2)
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, e
	}
	return time.Duration(ts.Nano()), nil
}
