package k8stest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// The faults of this file act on a local cluster's processes and on the
// network between a client and the API server, as the backend's fault
// tests and the nemesis need them: the API server crashed (KillAPIServer,
// RestartAPIServer) or frozen (PauseAPIServer, ResumeAPIServer), etcd
// crashed under it (KillEtcd, RestartEtcd), and a client cut, blackholed or
// slowed (ProxiedConfig). On a cluster of K8S_TEST_KUBECONFIG the process
// faults return ErrUnsupported; ProxiedConfig works on any cluster.

// KillAPIServer kills the API server (SIGKILL to its process group, a
// paused one too) and waits for it to end; etcd keeps its data. It is a
// no-op on a killed server.
func (c *Cluster) KillAPIServer() error {
	if c.api == nil {
		return fmt.Errorf("kill the API server: %w", ErrUnsupported)
	}
	c.api.mu.Lock()
	p := c.api.proc
	c.api.proc = nil
	c.api.mu.Unlock()
	if p != nil {
		p.kill()
	}
	return nil
}

// RestartAPIServer kills the API server (if it runs) and starts it again on
// the same port with the same flags, over the same etcd, returning when it
// is ready again (at most a minute, and no later than ctx).
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if err := c.KillAPIServer(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	for attempt := 1; ; attempt++ {
		// The port this server held is free again at once, unless another
		// process grabbed it in the gap: then wait for it a little.
		err := c.api.start(ctx, c.api.check)
		if err == nil || attempt == 20 || ctx.Err() != nil || !errors.Is(err, errPortTaken) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PauseAPIServer stops the API server with SIGSTOP: it accepts and answers
// nothing until ResumeAPIServer, while the kernel still queues what
// clients send it (their requests wait; no connection is refused).
// KillAPIServer and Close work on a paused server. It fails on a killed
// server.
func (c *Cluster) PauseAPIServer() error { return c.signal("pause", syscall.SIGSTOP) }

// ResumeAPIServer continues a paused API server with SIGCONT; it is
// harmless on a running one. It fails on a killed server.
func (c *Cluster) ResumeAPIServer() error { return c.signal("resume", syscall.SIGCONT) }

func (c *Cluster) signal(op string, sig syscall.Signal) error {
	if c.api == nil {
		return fmt.Errorf("%s the API server: %w", op, ErrUnsupported)
	}
	c.api.mu.Lock()
	defer c.api.mu.Unlock()
	p := c.api.proc
	if p == nil {
		return fmt.Errorf("k8stest: %s the API server: it is killed", op)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("k8stest: %s the API server: it has exited", op)
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("k8stest: %s the API server: %w", op, err)
	}
	if sig == syscall.SIGSTOP {
		// Return once it is stopped, not while the signal is on its way.
		return serverkit.WaitStopped(p.cmd.Process.Pid, readyTimeout)
	}
	return nil
}

// killGroup sends SIGKILL to the process group of pid.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

// KillEtcd kills etcd (SIGKILL), keeping its data: the API server stays up
// and answers errors (and its /readyz fails) until RestartEtcd.
func (c *Cluster) KillEtcd() error {
	if c.etcd == nil {
		return fmt.Errorf("kill etcd: %w", ErrUnsupported)
	}
	return c.etcd.Kill()
}

// RestartEtcd starts etcd again (killing it first if it runs) on the same
// ports with the same data, and returns when the API server (unless it is
// killed) is ready again over it (at most a minute, and no later than ctx).
func (c *Cluster) RestartEtcd(ctx context.Context) error {
	if c.etcd == nil {
		return fmt.Errorf("restart etcd: %w", ErrUnsupported)
	}
	if err := c.etcd.Restart(ctx); err != nil {
		return err
	}
	c.api.mu.Lock()
	running := c.api.proc != nil
	c.api.mu.Unlock()
	if !running { // killed: RestartAPIServer waits for it
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return c.api.check(ctx)
}

// ProxiedConfig returns a configuration of user (AdminUser, User or
// OtherUser) whose traffic goes through p: p listens on a port of its own
// (FaultProxy.Listen) and the client dials that address, while TLS still
// verifies the API server's name (ServerName). p's Cut, Blackhole and
// SetLatency then act on this client alone (and on whatever else uses p).
// Close p (the test's) before or after the cluster.
func (c *Cluster) ProxiedConfig(p *serverkit.FaultProxy, user string) (*rest.Config, error) {
	cfg := c.ConfigFor(user)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("k8stest: API server URL: %w", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "443")
	}
	addr, err := p.Listen(target)
	if err != nil {
		return nil, fmt.Errorf("k8stest: proxy: %w", err)
	}
	if cfg.TLSClientConfig.ServerName == "" {
		cfg.TLSClientConfig.ServerName = u.Hostname()
	}
	u.Host = addr
	cfg.Host = u.String()
	return cfg, nil
}
