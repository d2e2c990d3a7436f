package serverkit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// On Linux the children (servers) get Pdeathsig=SIGKILL, so that a test
// binary that crashes or is killed leaves none behind. The kernel sends that signal when
// the *thread* that forked the child ends, not the process, and the Go
// runtime may end threads at any time; so every child is forked from one
// goroutine locked to its own thread, which lives until stopSpawner (called
// by Run after the harnesses' cleanup) or the end of the process.

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

var spawner struct {
	mu   sync.Mutex
	reqs chan spawnReq
	done chan struct{}
}

func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// spawn starts cmd from the spawner thread.
func spawn(cmd *exec.Cmd) error {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	if spawner.reqs == nil {
		spawner.reqs = make(chan spawnReq)
		spawner.done = make(chan struct{})
		go spawnLoop(spawner.reqs, spawner.done)
	}
	res := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, res: res}
	return <-res
}

func spawnLoop(reqs <-chan spawnReq, done chan<- struct{}) {
	// Never unlocked: when this goroutine returns, its thread ends, and any
	// child still running gets SIGKILL from the kernel.
	runtime.LockOSThread()
	defer close(done)
	for r := range reqs {
		r.res <- r.cmd.Start()
	}
}

// stopSpawner ends the spawner goroutine (and its thread). A later spawn
// starts a new one.
func stopSpawner() {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	if spawner.reqs == nil {
		return
	}
	close(spawner.reqs)
	<-spawner.done
	spawner.reqs, spawner.done = nil, nil
}

// waitStopped waits until every thread of process pid is stopped. A SIGSTOP
// is delivered asynchronously: until the kernel has reached each thread, the
// server keeps serving, and a test that probes the server right after Pause
// would see it answer.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serverkit: process %d not stopped after %v", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func allThreadsStopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false, fmt.Errorf("serverkit: reading threads of process %d: %v", pid, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread ended
			}
			return false, err
		}
		// The state follows the command name, which is in parentheses and
		// may itself contain spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("serverkit: unexpected %s: %q", task, b)
		}
		if s := b[i+2]; s != 'T' && s != 't' && s != 'Z' && s != 'X' {
			return false, nil
		}
	}
	return true, nil
}

// ProcessGone reports whether process pid has ended (a zombie counts as
// ended: it only waits to be reaped): for a harness that sweeps the
// directories of test binaries that were killed before their cleanup.
func ProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
