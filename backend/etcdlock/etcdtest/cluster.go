package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// ClusterSize is the number of members of a Cluster: the smallest cluster
// that keeps a majority with one member down, killed, stopped or cut off.
const ClusterSize = 3

// Cluster is a local etcd cluster of ClusterSize members, for fault tests:
// each member can be killed (SIGKILL) and restarted with its data, stopped
// (SIGSTOP) and continued, and cut off from the other members and from
// every client (Partition). It is always started from the etcd binary
// (ETCD_BIN, else etcd on PATH): a server named by ETCD_TEST_ENDPOINTS can't
// be controlled, so LaunchCluster does not use one.
//
// Every byte between members goes through proxies of the test process: a
// member advertises, as its peer URL, a listener of the Cluster that
// forwards to its real peer port, and each connection is assigned to the
// ordered pair of members it links (the dialing member is found from the
// socket's owner, see peerSource), so that one member's links can be
// blackholed both ways. Clients reach a member through its front
// serverkit.FaultProxy (Endpoints, advertised as its client URL), which
// Partition blackholes too. DirectEndpoints bypass it, for inspectors.
//
// Its methods are safe for concurrent use.
type Cluster struct {
	bin, dir string
	members  []*member
	peers    *peerNet

	mu     sync.Mutex
	closed bool
}

// member is one member of a Cluster; its fields after name are set at
// launch and never change, but proc and paused, which c.mu guards.
type member struct {
	name       string
	id         uint64 // etcd's member ID, learnt once the cluster serves
	clientPort int
	peerPort   int
	front      *serverkit.FaultProxy // in front of the client port
	frontAddr  string
	peerAddr   string // the Cluster's peer listener for this member, advertised

	proc   *process // nil while killed
	paused bool
}

func (m *member) clientURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.clientPort))
}

// ClusterInstallHint is InstallHint for LaunchCluster, which always starts
// its members from the binary (ETCD_TEST_ENDPOINTS is not used).
const ClusterInstallHint = "install etcd: sudo apt-get install -y etcd-server (scripts/setup.sh does it), " +
	"or set " + EnvBinary + " to an etcd binary; " + EnvEndpoints + " is not used: the cluster's members are started here (they are killed, paused and partitioned)"

// LaunchCluster starts a cluster of ClusterSize members on free ports, each
// with its data in a temporary directory, and returns once every member is
// healthy (a leader elected). The caller must Close it. ctx bounds the
// startup (at most a minute). The error wraps ErrNoServer and holds
// ClusterInstallHint when the binary is missing or the cluster did not
// start; when ctx was cancelled it wraps ctx's error instead (an interrupted
// start is not a missing install).
func LaunchCluster(ctx context.Context) (*Cluster, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("etcd"); err != nil {
			return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, ClusterInstallHint)
		}
	}
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		c, err := tryCluster(ctx, bin)
		if err == nil {
			return c, nil
		}
		if errors.Is(outer.Err(), context.Canceled) {
			return nil, fmt.Errorf("etcdtest: cluster start interrupted (%w: %v): %v", outer.Err(), context.Cause(outer), err)
		}
		if attempt == 5 || ctx.Err() != nil || !errors.Is(err, errPortTaken) {
			return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, ClusterInstallHint)
		}
	}
}

// StartCluster launches a cluster for the test and closes it at the test's
// cleanup, failing the test (with ClusterInstallHint) when none can be had.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := LaunchCluster(context.Background())
	if err != nil {
		tb.Fatalf("etcdtest.StartCluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("etcdtest: closing the cluster: %v", err)
		}
	})
	return c
}

// tryCluster makes one attempt at starting a cluster on fresh ports; its
// error wraps errPortTaken when a member could not bind one.
func tryCluster(ctx context.Context, bin string) (_ *Cluster, err error) {
	dir, err := os.MkdirTemp("", "etcdtest-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	ports, err := serverkit.FreePorts(2 * ClusterSize)
	if err != nil {
		return nil, err
	}
	for i := range ClusterSize {
		c.members = append(c.members, &member{name: "m" + strconv.Itoa(i), clientPort: ports[2*i], peerPort: ports[2*i+1], front: serverkit.NewFaultProxy()})
	}
	// c.members is complete before a listener can accept (peerSource
	// reads it).
	c.peers = newPeerNet(c)
	for i, m := range c.members {
		if m.frontAddr, err = m.front.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(m.clientPort))); err != nil {
			return nil, err
		}
		if m.peerAddr, err = c.peers.listen(i, net.JoinHostPort("127.0.0.1", strconv.Itoa(m.peerPort))); err != nil {
			return nil, err
		}
	}
	errs := make(chan error, ClusterSize)
	for i := range c.members {
		go func() { errs <- c.startMember(ctx, i) }()
	}
	for range c.members {
		if e := <-errs; e != nil && (err == nil || errors.Is(e, errPortTaken)) {
			err = e
		}
	}
	if err != nil {
		return nil, err
	}
	return c, c.learnIDs(ctx)
}

// startMember runs member i's binary (with its data directory as it is) and
// waits until it is healthy, which needs a majority of members running.
func (c *Cluster) startMember(ctx context.Context, i int) error {
	m := c.members[i]
	var initial []string
	for _, o := range c.members {
		initial = append(initial, o.name+"=http://"+o.peerAddr)
	}
	mdir := filepath.Join(c.dir, m.name)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(mdir, "etcd.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin,
		"--name", m.name,
		"--data-dir", filepath.Join(mdir, "data"),
		"--listen-client-urls", m.clientURL(), "--advertise-client-urls", "http://"+m.frontAddr,
		"--listen-peer-urls", "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(m.peerPort)),
		"--initial-advertise-peer-urls", "http://"+m.peerAddr,
		"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
		"--initial-cluster-token", filepath.Base(c.dir),
		// etcd 3.5's default, off in 3.4: a member back from a partition
		// does not depose a leader the others still follow.
		"--pre-vote",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	)
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := serverkit.StartChild(cmd); err != nil {
		_ = logf.Close()
		return err
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	c.mu.Lock()
	m.proc, m.paused = p, false
	c.mu.Unlock()
	if err := waitHealthy(ctx, m.clientURL(), nil, p.exited); err != nil {
		c.mu.Lock()
		if m.proc == p {
			m.proc = nil
		}
		c.mu.Unlock()
		p.kill()
		tail := logTail(logPath)
		if strings.Contains(tail, "address already in use") {
			return fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return fmt.Errorf("etcd member %s: %v; log:\n%s", m.name, err, tail)
	}
	return nil
}

// learnIDs records each member's etcd member ID (for Leader).
func (c *Cluster) learnIDs(ctx context.Context) error {
	cli, err := c.adminClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, m := range c.members {
		st, err := cli.Status(ctx, m.clientURL())
		if err != nil {
			return fmt.Errorf("status of %s: %w", m.name, err)
		}
		m.id = st.Header.MemberId
	}
	return nil
}

// Size returns the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints returns the members' client endpoints (host:port) as clients
// should use them: through each member's front proxy, which Partition
// blackholes.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.frontAddr)
	}
	return out
}

// DirectEndpoints returns the members' own client ports (host:port), which
// no partition touches: for inspectors and administrators.
func (c *Cluster) DirectEndpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(m.clientPort)))
	}
	return out
}

// URL returns the etcd:// URL of the cluster's Endpoints with the key
// prefix prefix ("" for none; a leading "/" is added when missing), as
// etcdlock.Connect parses it.
func (c *Cluster) URL(prefix string) string {
	return "etcd://" + strings.Join(c.Endpoints(), ",") + urlPath(prefix)
}

// Client opens a client of every member's DirectEndpoints for the test (an
// inspector that no partition or proxy touches) and closes it at the test's
// cleanup.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := NewDirectClient(c)
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// NewDirectClient opens a client of c's DirectEndpoints, for programs (an
// administrator of a nemesis). The caller closes it.
func NewDirectClient(c *Cluster) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: c.DirectEndpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
}

// adminClient opens a direct client for one control (Leader, Compact),
// which closes it: a client kept open would hold connections (and their
// goroutines) that a nemesis run would count as its own leaks.
func (c *Cluster) adminClient() (*clientv3.Client, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return NewDirectClient(c)
}

// ErrClosed is returned by the controls of a closed Cluster.
var ErrClosed = errors.New("etcdtest: cluster is closed")

// Close kills every member, stops the proxies and removes the data
// directories. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	c.closed = true
	var procs []*process
	for _, m := range c.members {
		if m.proc != nil {
			procs = append(procs, m.proc)
			m.proc = nil
		}
	}
	c.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, m := range c.members {
		m.front.Close()
		serverkit.ReleasePorts(m.clientPort, m.peerPort)
	}
	if c.peers != nil {
		c.peers.close()
	}
	return os.RemoveAll(c.dir)
}
