package main

import "syscall"

// sysProcAttr puts the child in a process group of its own, and asks the
// kernel to send it SIGKILL if zkrecipes itself dies without stopping it
// (e.g. SIGKILL), so the command never outlives the process holding its
// lock unsupervised.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
