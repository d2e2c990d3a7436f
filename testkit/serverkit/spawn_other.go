//go:build unix && !linux

package serverkit

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// Outside Linux there is no parent-death signal: children get their own
// process group so that Close can kill them as a whole.

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

func stopSpawner() {}

// waitStopped gives the stop signal a moment to reach every thread; there is
// no portable way to observe it.
func waitStopped(pid int, timeout time.Duration) error {
	time.Sleep(min(timeout, 50*time.Millisecond))
	return nil
}

// ProcessGone reports whether process pid has ended: for a harness that
// sweeps the directories of test binaries that were killed before their
// cleanup.
func ProcessGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
