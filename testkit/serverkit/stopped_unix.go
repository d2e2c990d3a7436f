//go:build unix

package serverkit

import "time"

// WaitStopped waits until every thread of process pid is stopped (after a
// SIGSTOP, which the kernel delivers asynchronously: until it has reached
// each thread, the process keeps serving), for at most timeout. Outside
// Linux it only gives the signal a moment. Harnesses use it for their
// servers' Pause.
func WaitStopped(pid int, timeout time.Duration) error { return waitStopped(pid, timeout) }
