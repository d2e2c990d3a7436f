//go:build unix && !linux

package etcdtest

import (
	"os/exec"
	"syscall"
)

// Outside Linux there is no parent-death signal: the server gets its own
// process group so that Close can kill it as a whole.

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

func stopSpawner() {}
