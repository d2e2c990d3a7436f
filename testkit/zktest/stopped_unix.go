//go:build unix

package zktest

import "time"

// WaitStopped waits until every thread of process pid is stopped (after a
// SIGSTOP, which the kernel delivers asynchronously: until it has reached
// each thread, the process keeps serving), for at most timeout. Outside
// Linux it only gives the signal a moment. Other servers' harnesses use it
// for their own Pause.
func WaitStopped(pid int, timeout time.Duration) error { return waitStopped(pid, timeout) }
