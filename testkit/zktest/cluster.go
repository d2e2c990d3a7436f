package zktest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// controller is implemented by providers whose servers can be controlled.
// Indexes are already checked by Cluster.
type controller interface {
	stop(i int) error
	kill(i int) error
	restart(ctx context.Context, i int) error
	pause(i int) error
	resume(i int) error
	// running reports whether server i's process is up (for Leader).
	running(i int) bool
	// pid returns server i's process id while it runs.
	pid(i int) (int, error)
}

// Cluster is a set of real ZooKeeper servers, optionally seen through a
// chroot. Its methods are safe for concurrent use.
type Cluster struct {
	provider string
	addrs    []string
	chroot   string
	ctrl     controller // nil when the cluster cannot be controlled
	noCtrl   string     // why ctrl is nil

	// secureAddrs and tls are the TLS ports and certificates (WithTLS).
	secureAddrs []string
	tls         *tlsSetup

	closeOnce sync.Once
	closeErr  error
	closeFn   func() error
	// logTails returns the last n lines of each server's log, when known.
	logTails func(n int) string
	// keep makes Close leave the servers' directories and returns where
	// they are; nil when the cluster has none of its own.
	keep     func() string
	closedMu sync.Mutex
	closed   bool
}

// Servers returns the client connect list: one "127.0.0.1:port" (or the
// external ensemble's host:port) per server. When the cluster has a chroot it
// is appended to the last element, as in "127.0.0.1:2181,127.0.0.1:2182/zktest/x",
// following ZooKeeper's connect-string convention. go-zookeeper v1.0.4 does
// not understand that suffix: give it Addrs and prefix paths with Chroot
// instead. The slice is a copy.
func (c *Cluster) Servers() []string {
	s := c.Addrs()
	if c.chroot != "" && len(s) > 0 {
		s[len(s)-1] += c.chroot
	}
	return s
}

// Addrs returns the plain host:port of each server, without chroot, in server
// order (index i of the controls is Addrs()[i]). Use it for four-letter words
// and for proxies. The slice is a copy.
func (c *Cluster) Addrs() []string {
	return append([]string(nil), c.addrs...)
}

// Chroot returns the cluster's chroot path, such as "/zktest/TestX-1a2b3c4d",
// or "" when clients see the whole tree.
func (c *Cluster) Chroot() string { return c.chroot }

// Provider names where the servers come from: "local" (JVMs started by
// zktest), "env" (ZK_TEST_SERVERS) or "docker" (testcontainers).
func (c *Cluster) Provider() string { return c.provider }

// Close stops the servers the cluster owns (SIGKILL to their process groups,
// waiting for exit), removes their temporary directories, and deletes the
// cluster's chroot with everything under it. It is idempotent; later calls
// return the first call's error.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closedMu.Lock()
		c.closed = true
		c.closedMu.Unlock()
		if c.closeFn != nil {
			c.closeErr = c.closeFn()
		}
	})
	return c.closeErr
}

// KeepDirs makes Close leave the servers' directories on disk, for a
// post-mortem of a failed run: one serverN folder per server (numbered
// from 1, as its myid) with its zoo.cfg, its server.log and its data
// directory (transaction logs and snapshots). It returns their parent
// directory, or "" when the cluster has no directories of its own (an
// external ensemble, a container, a Shared view). Kept directories are no
// longer removed by the sweep of stale directories that Start and Launch
// do: delete them by hand. Call it before Close; calling it again returns
// the same directory.
func (c *Cluster) KeepDirs() string {
	if c.keep == nil {
		return ""
	}
	return c.keep()
}

// ServerVersion returns the version line that server i (as in Addrs)
// reports to the srvr four-letter word, such as
// "3.8.0-${mvngit.commit.id}, built on ..." for Debian's 3.8.0 package.
// The server must be up; ctx bounds the exchange.
func (c *Cluster) ServerVersion(ctx context.Context, i int) (string, error) {
	if i < 0 || i >= len(c.addrs) {
		return "", fmt.Errorf("zktest: ServerVersion(%d): server index out of range [0,%d)", i, len(c.addrs))
	}
	return serverVersion(ctx, c.addrs[i])
}

// ServerPID returns the operating-system process id of server i (as in
// Addrs): the JVM zktest started, for reading its resource use (CPU time
// in /proc/<pid>/stat, say). It changes when Restart starts a new process.
// The error wraps ErrUnsupported when the server is not a local process of
// this cluster (an external ensemble from ZK_TEST_SERVERS, a container, a
// Shared view), ErrClosed after Close, and says so when the index is out
// of range or the server is not running (stopped or killed).
func (c *Cluster) ServerPID(i int) (int, error) {
	ctrl, err := c.control("ServerPID", i)
	if err != nil {
		return 0, err
	}
	return ctrl.pid(i)
}

func (c *Cluster) control(op string, i int) (controller, error) {
	c.closedMu.Lock()
	closed := c.closed
	c.closedMu.Unlock()
	if closed {
		return nil, fmt.Errorf("zktest: %s(%d): %w", op, i, ErrClosed)
	}
	if c.ctrl == nil {
		return nil, fmt.Errorf("zktest: %s(%d) on %s: %w", op, i, c.noCtrl, ErrUnsupported)
	}
	if i < 0 || i >= len(c.addrs) {
		return nil, fmt.Errorf("zktest: %s(%d): server index out of range [0,%d)", op, i, len(c.addrs))
	}
	return c.ctrl, nil
}

// Stop stops server i (0-based, as in Addrs) gracefully with SIGTERM and
// waits until its process has exited (up to 10 s, then it is killed). A
// paused server is resumed so that it can handle the signal. Stopping a
// server that is not running is a no-op. The error wraps ErrUnsupported for
// clusters that cannot be controlled and ErrClosed after Close.
func (c *Cluster) Stop(i int) error {
	ctrl, err := c.control("Stop", i)
	if err != nil {
		return err
	}
	return ctrl.stop(i)
}

// Kill kills server i with SIGKILL (the whole process group) and waits until
// its process has exited. Killing a server that is not running is a no-op.
// The error wraps ErrUnsupported for clusters that cannot be controlled and
// ErrClosed after Close.
func (c *Cluster) Kill(i int) error {
	ctrl, err := c.control("Kill", i)
	if err != nil {
		return err
	}
	return ctrl.kill(i)
}

// Restart starts server i again with the same configuration, ports and data
// directory, stopping it gracefully first if it is still running, and waits
// up to 30 s until it serves clients (standalone, or following/leading in an
// ensemble). A member of an ensemble serves only once a quorum is up, so
// after stopping a majority, restart the others concurrently. The error holds
// the tail of the server's log when it does not come up; it wraps
// ErrUnsupported for clusters that cannot be controlled and ErrClosed after
// Close.
func (c *Cluster) Restart(i int) error {
	ctrl, err := c.control("Restart", i)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return ctrl.restart(ctx, i)
}

// Pause freezes server i with SIGSTOP to its process group: its sockets stay
// open but it answers nothing, so clients and peers only notice through their
// timeouts. On Linux it returns once every thread of the JVM is stopped (the
// signal is delivered asynchronously; up to 5 s). Undo it with Resume. The
// error wraps ErrUnsupported for clusters that cannot be controlled and
// ErrClosed after Close; pausing a server that is not running is an error.
func (c *Cluster) Pause(i int) error {
	ctrl, err := c.control("Pause", i)
	if err != nil {
		return err
	}
	return ctrl.pause(i)
}

// Resume continues server i after Pause with SIGCONT. The error wraps
// ErrUnsupported for clusters that cannot be controlled and ErrClosed after
// Close.
func (c *Cluster) Resume(i int) error {
	ctrl, err := c.control("Resume", i)
	if err != nil {
		return err
	}
	return ctrl.resume(i)
}

// Leader returns the index (as in Addrs) of the server that reports "Mode:
// leader" to the srvr four-letter word; a standalone server is its own leader,
// so a one-server cluster answers 0. Servers that are stopped or do not answer
// within 2 s are skipped. It only reads, so it also works on external
// ensembles and Shared views (which have a single entry when standalone). The
// error wraps ErrNoLeader when no server claims leadership (for example during
// an election: poll), and ErrClosed after Close.
func (c *Cluster) Leader() (int, error) {
	c.closedMu.Lock()
	closed := c.closed
	c.closedMu.Unlock()
	if closed {
		return -1, fmt.Errorf("zktest: Leader: %w", ErrClosed)
	}
	var modes []string
	for i, a := range c.addrs {
		if c.ctrl != nil && !c.ctrl.running(i) {
			modes = append(modes, fmt.Sprintf("%d: not running", i))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		mode, err := serverMode(ctx, a)
		cancel()
		if err != nil {
			modes = append(modes, fmt.Sprintf("%d: %v", i, err))
			continue
		}
		if mode == "leader" || mode == "standalone" {
			return i, nil
		}
		modes = append(modes, fmt.Sprintf("%d: %s", i, mode))
	}
	return -1, fmt.Errorf("%w (%s)", ErrNoLeader, strings.Join(modes, "; "))
}
