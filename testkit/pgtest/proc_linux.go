package pgtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// stopWait bounds the wait for a SIGSTOP to reach every thread.
const stopWait = 5 * time.Second

// stopAndWait sends SIGSTOP to pid and waits until the kernel has stopped
// it (a signal is delivered asynchronously: until then the process keeps
// serving). An error wrapping syscall.ESRCH means the process is gone.
func stopAndWait(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgtest: SIGSTOP %d: %w", pid, err)
	}
	deadline := time.Now().Add(stopWait)
	for {
		st, err := procState(pid)
		switch {
		case err != nil:
			return fmt.Errorf("pgtest: process %d: %w", pid, syscall.ESRCH)
		case st == 'T' || st == 't' || st == 'Z' || st == 'X':
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("pgtest: process %d not stopped after %v (state %c)", pid, stopWait, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState returns the state letter of /proc/pid/stat.
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The state follows the command name, which is in parentheses and may
	// hold spaces and parentheses itself.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, b)
	}
	return b[i+2], nil
}

// children returns the pids of the processes whose parent is pid.
func children(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := bytes.Fields(b[i+2:]) // state, ppid, ...
		if len(f) < 2 {
			continue
		}
		if pp, _ := strconv.Atoi(string(f[1])); pp == pid {
			k, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			kids = append(kids, k)
		}
	}
	return kids, nil
}
