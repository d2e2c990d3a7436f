package main

import "syscall"

// sysProcAttr puts the child in a process group of its own, and asks the
// kernel to send it SIGKILL if zkrecipes itself dies without stopping it
// (e.g. SIGKILL). That reaches the direct child only; the guard process
// (startGuard) kills the rest of its group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
