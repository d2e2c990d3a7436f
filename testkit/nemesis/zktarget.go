package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
	"go.uber.org/goleak"
)

// zkTarget is ZooKeeper under the nemesis: a zktest cluster, an admin
// connection straight to its servers (no proxy) for setting runs up, the
// delete-dir fault and the checks, and the run's clients (for the
// expire-session fault and the diagnosis).
type zkTarget struct {
	cl      *zktest.Cluster
	request time.Duration // the session timeout clients ask for

	mu       sync.Mutex
	admin    *adminConn
	base     string // the run's base znode, below the chroot
	baseline int    // the servers' watch count before the run
	based    bool   // the base znode was deleted after the run
	T        time.Duration
	clients  map[int]*zkClient
	down     map[int]bool // servers whose restart failed
}

// ZooKeeperTarget is the ensemble cl as a Target (Name "zk"): clients on
// sessions of 2 s (Run asks for Config.SessionTimeout instead), faults
// kill-server, stop-server, kill-leader and pause-server when cl's servers
// can be controlled (zktest.Start with a local install), expire-session
// and delete-dir; the fencezk register (RegZnode) at base+"/register";
// leftovers: any znode under base+"/lock", and the servers' watch count
// away from its baseline. Close closes its admin connection.
func ZooKeeperTarget(cl *zktest.Cluster) Target { return newZKTarget(cl, 2*time.Second) }

func newZKTarget(cl *zktest.Cluster, sessionTimeout time.Duration) *zkTarget {
	return &zkTarget{cl: cl, request: sessionTimeout, clients: map[int]*zkClient{}, down: map[int]bool{}}
}

// zkClient is one client's session, behind its proxy and tap, with its
// handle on the znode register.
type zkClient struct {
	id  int
	s   *zookeeper.Session
	tap *zktest.SessionTap
	reg *fencezk.Register
}

func (c *zkClient) Lock(name string) (recipe.Lock, error) { return mutex.New(c.s, name) }
func (c *zkClient) Close() error                          { c.s.Close(); return nil }

// zkSession is the ZooKeeper session of c, for ZooKeeper's own recipes.
func zkSession(c Client) (*zookeeper.Session, error) {
	zc, ok := c.(*zkClient)
	if !ok {
		return nil, fmt.Errorf("nemesis: a ZooKeeper recipe on a %T client (ZooKeeper's target only)", c)
	}
	return zc.s, nil
}

func (t *zkTarget) Name() string { return "zk" }

func (t *zkTarget) lockDir() string { return t.base + "/lock" }

// Prepare dials the admin connection (EndRun closes it), clears base,
// creates the znode register (empty: fencezk's empty register) and reads
// the servers' watch count.
func (t *zkTarget) Prepare(ctx context.Context, base string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.admin == nil {
		a, err := dialAdmin(ctx, t.cl)
		if err != nil {
			return err
		}
		t.admin = a
	}
	t.base, t.based, t.clients = base, false, map[int]*zkClient{}
	abs := t.cl.Chroot() + base
	if err := deleteAll(t.admin.conn, abs); err != nil {
		return fmt.Errorf("nemesis: clearing %s: %w", abs, err)
	}
	if err := createAll(t.admin.conn, abs+"/register", nil); err != nil {
		return fmt.Errorf("nemesis: creating the register: %w", err)
	}
	var err error
	if t.baseline, err = watchCount(ctx, t.cl); err != nil {
		return fmt.Errorf("nemesis: baseline watch count: %w", err)
	}
	return nil
}

// Connect opens client i's session through p, tapped so that the
// expire-session fault knows its id and password.
func (t *zkTarget) Connect(ctx context.Context, i int, p *serverkit.FaultProxy) (Client, error) {
	c := &zkClient{id: i, tap: zktest.NewSessionTap()}
	// The nemesis suspends and cuts sessions all the time: their warnings
	// (which a Session sends to slog.Default() by default) say nothing
	// the history does not.
	s, err := zookeeper.Connect(ctx, t.cl.Servers(), zookeeper.WithDialer(c.tap.Dialer(p.Dial)),
		zookeeper.WithSessionTimeout(t.request), zookeeper.WithConnectTimeout(30*time.Second),
		zookeeper.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	c.s = s
	if c.reg, err = fencezk.New(s, t.base+"/register"); err != nil {
		s.Close()
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clients[i] = c
	if t.T == 0 {
		t.T = s.SessionTimeout()
	}
	return c, nil
}

func (t *zkTarget) SessionTimeout() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.T == 0 {
		return t.request
	}
	return t.T
}

func (t *zkTarget) client(i int) *zkClient {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clients[i]
}

// Registers is the fencezk register: read, compare the stored token,
// setData with the version read, again after a concurrent write. A
// write's order is its new data version (prev.Version+1: 0 for the write
// that creates the znode), plus one, since Seq counts from 1.
func (t *zkTarget) Registers() []Register {
	return []Register{{Name: RegZnode, Write: func(ctx context.Context, client int, token fence.Token, val string, live func()) (State, int64, error) {
		prev, err := t.client(client).reg.Write(ctx, token, []byte(val))
		if err != nil {
			return State{}, 0, err
		}
		live()
		return State{prev.Token, string(prev.Data)}, int64(prev.Version) + 2, nil
	}}}
}

// Heal restarts the servers whose restart failed, continues the paused
// ones, and waits until every server serves (up to 60 s).
func (t *zkTarget) Heal(ctx context.Context) error {
	t.mu.Lock()
	down := t.down
	t.down = map[int]bool{}
	t.mu.Unlock()
	var errs []error
	for i := range t.cl.Addrs() {
		if down[i] {
			if err := t.cl.Restart(i); err != nil {
				errs = append(errs, err)
			}
		} else if err := t.cl.Resume(i); err != nil && !errors.Is(err, zktest.ErrUnsupported) {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range t.cl.Addrs() {
		for {
			out, err := zktest.FourLetter(ctx, a, "srvr")
			if err == nil && (strings.Contains(out, "Mode: leader") || strings.Contains(out, "Mode: follower") || strings.Contains(out, "Mode: standalone")) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("server %s not serving after the heal: %v", a, err))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists the znodes under the recipe's directory; once there are
// none, it deletes the run's base znode and compares the servers' watch
// count with its baseline.
func (t *zkTarget) Leftovers(ctx context.Context) ([]string, error) {
	dir := t.lockDir()
	left, err := listAll(t.admin.conn, t.cl.Chroot()+dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s after the run: %w", dir, err)
	}
	if len(left) > 0 {
		return []string{fmt.Sprintf("%d znodes left under %s: %s", len(left), dir, strings.Join(left, ", "))}, nil
	}
	if !t.based {
		if err := deleteAll(t.admin.conn, t.cl.Chroot()+t.base); err != nil {
			return nil, fmt.Errorf("deleting %s: %w", t.base, err)
		}
		t.based = true
	}
	wc, err := watchCount(ctx, t.cl)
	if err != nil {
		return nil, fmt.Errorf("server watch count: %w", err)
	}
	if wc != t.baseline {
		return []string{fmt.Sprintf("server watch count %d after the run, baseline %d", wc, t.baseline)}, nil
	}
	return nil, nil
}

// Diagnose is diagnose over the run's clients.
func (t *zkTarget) Diagnose(ctx context.Context) []string {
	t.mu.Lock()
	clients := make([]*zkClient, 0, len(t.clients))
	for i := range len(t.clients) {
		if c := t.clients[i]; c != nil {
			clients = append(clients, c)
		}
	}
	t.mu.Unlock()
	return diagnose(ctx, t.cl, t.cl.Chroot(), t.lockDir(), clients)
}

// IgnoreLeaks: the reaper of a server process restarted by the nemesis.
func (t *zkTarget) IgnoreLeaks() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/zkrecipes/zkrecipes/testkit/zktest.(*localCluster).spawnNode.func1")}
}

// EndRun closes the admin connection, which Prepare dials again: the
// connection's reconnections after server faults start goroutines of their
// own, which must be gone before the goroutine check.
func (t *zkTarget) EndRun(context.Context) error { return t.Close() }

// Close closes the admin connection.
func (t *zkTarget) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.admin != nil {
		t.admin.close()
		t.admin = nil
	}
	return nil
}
