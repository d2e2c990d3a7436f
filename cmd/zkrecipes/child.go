package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// child is the command run under a lock or leadership. It runs in a process
// group of its own, so that zkrecipes can signal it and everything it
// started at once, and so that a SIGSTOP/SIGCONT or a terminal's signals
// aimed at zkrecipes are not what decides the child's fate: zkrecipes
// forwards SIGINT, SIGTERM and SIGHUP itself.
type child struct {
	cmd   *exec.Cmd
	log   *slog.Logger
	done  chan struct{} // closed when the child has exited
	state *os.ProcessState
	guard *os.File // write end of the guard's pipe (nil: no guard)
}

// startChild starts argv with the environment env (made by childEnv:
// without the secrets --pass-env does not name). An error means it did
// not start; startStatus says which status a shell would give for it (127
// not found, 126 not executable).
func startChild(log *slog.Logger, argv, env []string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, log: log.With("pid", cmd.Process.Pid), done: make(chan struct{})}
	g, err := startGuard(cmd.Process.Pid)
	if err != nil {
		// Without a guard the command still runs; only a zkrecipes killed
		// with SIGKILL would leave its grandchildren behind.
		c.log.Warn("no guard process: if zkrecipes is killed, what the command started may outlive it", "err", err)
	}
	c.guard = g
	go func() {
		c.cmd.Wait() // the status is in ProcessState
		c.state = c.cmd.ProcessState
		close(c.done)
	}()
	c.log.Debug("command started", "argv", argv)
	return c, nil
}

// startStatus is the exit status a shell reports for a command that could
// not be started.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// signal sends sig to the child's process group.
func (c *child) signal(sig syscall.Signal) {
	if err := syscall.Kill(-c.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.log.Warn("signalling the command's process group failed", "signal", sig, "err", err)
	}
}

// stop ends the child: sig (SIGTERM, or the signal zkrecipes received) to
// its process group, then SIGKILL to the group after grace, or at once when
// a signal arrives on sigs or end is closed (the reason is why, for the
// log) while it stops; nil channels never fire. A signal during the grace
// period is the operator saying "now": it is never ignored. It returns
// once the child has exited.
func (c *child) stop(sig syscall.Signal, grace time.Duration, sigs <-chan os.Signal, end <-chan struct{}, why string) {
	select {
	case <-c.done:
	default:
		c.log.Info("stopping the command", "signal", sig, "grace", grace)
		c.signal(sig)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
			c.log.Warn("the command outlived its grace period: SIGKILL", "grace", grace)
		case got := <-sigs:
			c.log.Warn("signal received while the command was stopping: SIGKILL", "signal", got)
		case <-end:
			c.log.Warn(why)
		}
		c.signal(syscall.SIGKILL)
		<-c.done
	}
	// Whatever the command left behind in its group goes too: nothing may
	// keep working under a lock that is no longer held.
	c.signal(syscall.SIGKILL)
}

// status is the child's exit status as a shell reports it: its exit code,
// or 128+n when it was killed by signal n.
func (c *child) status() int {
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// signaled reports whether the command ended by a signal.
func (c *child) signaled() bool {
	ws, ok := c.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// outcome is how a supervised run ended.
type outcome int

const (
	exited      outcome = iota // the child exited by itself
	lost                       // ownership ended; the child was stopped
	interrupted                // zkrecipes got a signal; it was forwarded and the child stopped
)

// supervise waits until the child exits, ownership ends (owned is done),
// or a signal arrives on sigs (forwarded to the child, which then gets
// grace to exit before SIGKILL). On loss the child is stopped with SIGTERM
// and SIGKILL after grace, or at once on a signal meanwhile (on sigs, or
// quit closed). An owned ended by a signal (its cause an
// interrupt: elect's loop, where the supervisor's watcher takes the first
// signal, closes quit and ends the leader function's context with it) is
// not a loss: the signal is forwarded as if it had come on sigs, and later
// signals arrive on later. It returns once the child has exited.
func (c *child) supervise(owned context.Context, sigs, later <-chan os.Signal, quit <-chan struct{}, grace time.Duration) (outcome, os.Signal) {
	defer c.disarm()
	select {
	case <-c.done:
		// Whatever the command left running in its group goes too: the
		// lock is released next, and nothing may keep working without it.
		c.signal(syscall.SIGKILL)
		if owned.Err() != nil {
			// Both happened: the command cannot be trusted to have run
			// under the lock throughout.
			return lost, nil
		}
		return exited, nil
	case <-owned.Done():
		var in interrupt
		if errors.As(context.Cause(owned), &in) {
			return c.interrupt(in.sig, grace, later, nil, "")
		}
		c.log.Warn("ownership lost: stopping the command", "cause", context.Cause(owned))
		// Not later: elect's watcher still waits for the first signal (it
		// must end the campaign too), and closes quit when it has it.
		c.stop(syscall.SIGTERM, grace, sigs, quit, "signal received while the command was stopping: SIGKILL")
		return lost, nil
	case sig := <-sigs:
		return c.interrupt(sig, grace, sigs, owned.Done(), "ownership lost while the command was stopping: SIGKILL")
	}
}

// interrupt forwards sig, which zkrecipes received, to the child and stops
// it (see stop).
func (c *child) interrupt(sig os.Signal, grace time.Duration, sigs <-chan os.Signal, end <-chan struct{}, why string) (outcome, os.Signal) {
	c.log.Info("signal received: forwarding it to the command", "signal", sig)
	s, _ := sig.(syscall.Signal)
	if s == 0 {
		s = syscall.SIGTERM
	}
	c.stop(s, grace, sigs, end, why)
	return interrupted, sig
}

// interrupt is the cause of the supervisor's context when a signal ended
// it (see common.supervise).
type interrupt struct{ sig os.Signal }

func (i interrupt) Error() string { return fmt.Sprintf("signal %v", i.sig) }

// describe formats the child's end for logs.
func (c *child) describe() string {
	return fmt.Sprintf("%v", c.state)
}

// guardArg is the hidden subcommand of the guard process.
const guardArg = "__guard"

// startGuard starts the guard of the process group pgid: a second
// zkrecipes process (in a group of its own) that reads its stdin, a pipe
// whose write end only this process holds. If this process dies without
// disarming it (SIGKILL, a crash, the OOM killer), the pipe reports EOF
// and the guard sends SIGKILL to the whole group: the kernel's parent-death
// signal reaches only the direct child, not what it started, and that must
// not keep running once the lock's holder is gone. A process that leaves
// the group (setsid, a daemon) escapes it.
func startGuard(pgid int) (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	g := exec.Command(exe, guardArg, strconv.Itoa(pgid))
	g.Env = []string{} // it needs nothing, and must hold no secret of zkrecipes'
	g.Stdin = r
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = g.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	go g.Wait() // reaped when it exits (after disarm)
	return w, nil
}

// disarm tells the guard that the group has been dealt with: it exits
// without signalling anything.
func (c *child) disarm() {
	if c.guard != nil {
		_, _ = c.guard.Write([]byte{1})
		c.guard.Close()
		c.guard = nil
	}
}

// runGuard is the guard process: it waits for a byte (disarmed) or EOF
// (its parent died) on stdin, and on EOF kills the process group args[0].
func runGuard(args []string) int {
	if len(args) != 1 {
		return exitUsage
	}
	pgid, err := strconv.Atoi(args[0])
	if err != nil || pgid <= 1 {
		return exitUsage
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var b [1]byte
	if n, _ := os.Stdin.Read(b[:]); n == 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}
