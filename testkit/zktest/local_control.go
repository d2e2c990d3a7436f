//go:build unix

package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// The controls of a localCluster (the controller of its Cluster) and the
// JVM processes they act on.

// process is one running JVM; done is closed when it has been reaped.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid after done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group of p.
func (p *process) signal(sig syscall.Signal) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// proc returns server i's process, or nil.
func (lc *localCluster) proc(i int) (*process, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return nil, ErrClosed
	}
	return lc.nodes[i].proc, nil
}

func (lc *localCluster) running(i int) bool {
	p, err := lc.proc(i)
	return err == nil && p != nil && !p.exited()
}

func (lc *localCluster) pid(i int) (int, error) {
	p, err := lc.runningProc(i)
	if err != nil {
		return 0, err
	}
	return p.cmd.Process.Pid, nil
}

func (lc *localCluster) stop(i int) error {
	p, err := lc.proc(i)
	if err != nil || p == nil {
		return err
	}
	p.signal(syscall.SIGTERM)
	p.signal(syscall.SIGCONT) // a paused JVM cannot handle SIGTERM
	if p.wait(stopTimeout) {
		return nil
	}
	lc.cfg.logger.Warn("zktest: server ignored SIGTERM, killing it", "server", i)
	p.signal(syscall.SIGKILL)
	if !p.wait(stopTimeout) {
		return fmt.Errorf("zktest: server %d did not exit after SIGKILL", i)
	}
	return nil
}

func (lc *localCluster) kill(i int) error {
	p, err := lc.proc(i)
	if err != nil || p == nil {
		return err
	}
	p.signal(syscall.SIGKILL)
	if !p.wait(stopTimeout) {
		return fmt.Errorf("zktest: server %d did not exit after SIGKILL", i)
	}
	return nil
}

func (lc *localCluster) pause(i int) error {
	p, err := lc.runningProc(i)
	if err != nil {
		return err
	}
	p.signal(syscall.SIGSTOP)
	return serverkit.WaitStopped(p.cmd.Process.Pid, 5*time.Second)
}

func (lc *localCluster) resume(i int) error {
	p, err := lc.runningProc(i)
	if err != nil {
		return err
	}
	p.signal(syscall.SIGCONT)
	return nil
}

func (lc *localCluster) runningProc(i int) (*process, error) {
	p, err := lc.proc(i)
	if err != nil {
		return nil, err
	}
	if p == nil || p.exited() {
		return nil, fmt.Errorf("zktest: server %d is not running", i)
	}
	return p, nil
}

func (lc *localCluster) restart(ctx context.Context, i int) error {
	if err := lc.stop(i); err != nil {
		return err
	}
	lc.mu.Lock()
	if lc.closed {
		lc.mu.Unlock()
		return ErrClosed
	}
	nd := lc.nodes[i]
	err := lc.spawnNode(nd)
	lc.mu.Unlock()
	if err != nil {
		return fmt.Errorf("zktest: restarting server %d: %w", i, err)
	}
	if err := lc.waitReady(ctx, nd); err != nil {
		return fmt.Errorf("zktest: restarting server %d: %w", i, err)
	}
	return nil
}

// close kills every JVM, waits for them, and removes the directory.
func (lc *localCluster) close() error {
	lc.mu.Lock()
	lc.closed = true
	keep := lc.keep
	var procs []*process
	for _, nd := range lc.nodes {
		if nd.proc != nil {
			procs = append(procs, nd.proc)
		}
	}
	lc.mu.Unlock()
	var errs []error
	for _, p := range procs {
		p.signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		if !p.wait(stopTimeout) {
			errs = append(errs, fmt.Errorf("zktest: pid %d did not exit after SIGKILL", p.cmd.Process.Pid))
		}
	}
	serverkit.ReleasePorts(lc.ports...) // every JVM has exited
	if !keep {
		if err := os.RemoveAll(lc.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
