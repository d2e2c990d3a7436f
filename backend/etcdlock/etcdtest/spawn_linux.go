package etcdtest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux the server gets Pdeathsig=SIGKILL, so that a test binary that
// crashes or is killed leaves no server behind. The kernel sends that signal
// when the thread that forked the child ends, and the Go runtime may end
// threads at any time; so every server is forked from one goroutine locked
// to its own thread, which lives until stopSpawner (called by Main) or the
// end of the process.

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
	// Never unlocked: when this goroutine returns, its thread ends, and a
	// server still running gets SIGKILL from the kernel.
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
