package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// The faults of a Cluster: each acts on the real member processes or on the
// proxies every byte goes through, never on a mock.

// member returns member i, or an error for an index out of range or a
// closed cluster; c.mu must be held.
func (c *Cluster) memberLocked(i int) (*member, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(c.members) {
		return nil, fmt.Errorf("etcdtest: no member %d", i)
	}
	return c.members[i], nil
}

// Kill kills member i (SIGKILL, no chance to flush or say goodbye) and
// waits until it has exited, keeping its data directory. It is a no-op on a
// killed member.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	m, err := c.memberLocked(i)
	var p *process
	if err == nil {
		p, m.proc, m.paused = m.proc, nil, false
	}
	c.mu.Unlock()
	if p != nil {
		p.kill()
	}
	return err
}

// Restart kills member i if it runs and starts it again as the same member
// (same name, ports and data directory), returning once it is healthy,
// which needs a majority of the cluster running and reachable.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.Kill(i); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	for {
		err := c.startMember(ctx, i)
		if err == nil || !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond) // the old socket may linger an instant
	}
}

// Pause stops member i (SIGSTOP) and returns once every thread of it is
// stopped: it holds its connections and answers nothing until Resume.
func (c *Cluster) Pause(i int) error {
	c.mu.Lock()
	m, err := c.memberLocked(i)
	if err == nil && m.proc == nil {
		err = fmt.Errorf("etcdtest: member %d is not running", i)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	pid := m.proc.cmd.Process.Pid
	m.paused = true
	c.mu.Unlock()
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		return err
	}
	return serverkit.WaitStopped(pid, 5*time.Second)
}

// Resume continues member i (SIGCONT) after Pause. It is a no-op on a member
// that runs, and an error on a killed one.
func (c *Cluster) Resume(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.memberLocked(i)
	if err != nil {
		return err
	}
	if m.proc == nil {
		return fmt.Errorf("etcdtest: member %d is not running", i)
	}
	m.paused = false
	return syscall.Kill(-m.proc.cmd.Process.Pid, syscall.SIGCONT)
}

// Partition cuts member i off from the other members and from every client
// coming through Endpoints: every link to or from it, live or new, is
// blackholed (connections stay open, nothing crosses either way), until
// Heal. One member at most is cut off at a time: a later Partition moves
// the cut.
func (c *Cluster) Partition(i int) error { return c.cut(i, true) }

// Silence blackholes every client link of member i that comes through
// Endpoints (live or new: connections stay open, nothing crosses either
// way) and leaves its peer links alone: the member stays in the cluster,
// as leader if it was, and answers no client, until Heal. A later
// Partition or Silence moves the fault.
func (c *Cluster) Silence(i int) error { return c.cut(i, false) }

// cut is Partition (peers too) or Silence (clients only) of member i.
func (c *Cluster) cut(i int, peers bool) error {
	c.mu.Lock()
	m, err := c.memberLocked(i)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.Heal()
	if peers {
		if err := c.peers.isolate(i); err != nil {
			return err
		}
	}
	m.front.Blackhole()
	return nil
}

// Heal ends a Partition or a Silence: the links that were blackholed are
// closed (their data is lost, as in a real partition) and new ones forward
// again.
func (c *Cluster) Heal() {
	c.peers.isolate(-1) //nolint:errcheck // -1 never fails
	for _, m := range c.members {
		m.front.Resume()
	}
}

// HealAll undoes every fault in effect: it ends the partition, continues
// stopped members, restarts killed ones, and returns once every member is
// healthy (or ctx ends).
func (c *Cluster) HealAll(ctx context.Context) error {
	c.Heal()
	var errs []error
	for i := range c.members {
		c.mu.Lock()
		m, err := c.memberLocked(i)
		killed := err == nil && m.proc == nil
		c.mu.Unlock()
		switch {
		case err != nil:
			return err
		case killed:
			if err := c.Restart(ctx, i); err != nil {
				errs = append(errs, fmt.Errorf("restarting member %d: %w", i, err))
			}
		default:
			if err := c.Resume(i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// WaitHealthy returns once every member answers /health as healthy (it is
// running and a leader serves it), or ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for i, m := range c.members {
		c.mu.Lock()
		p := m.proc
		c.mu.Unlock()
		if p == nil {
			return fmt.Errorf("etcdtest: member %d is not running", i)
		}
		if err := waitHealthy(ctx, m.clientURL(), nil, p.exited); err != nil {
			return fmt.Errorf("etcdtest: member %d: %w", i, err)
		}
	}
	return nil
}

// Running reports whether member i runs (neither killed nor paused).
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.memberLocked(i)
	return err == nil && m.proc != nil && !m.paused
}

// Leader returns the index of the member that leads: one that reports
// itself as the leader (the highest term wins if, for an instant, two do).
// Killed and paused members are not asked. The error says when none does
// (an election in progress, no majority).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	cli, err := c.adminClient()
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	best, term := -1, uint64(0)
	for i, m := range c.members {
		if !c.Running(i) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.clientURL())
		cancel()
		if err == nil && st.Leader == m.id && st.Leader != 0 && st.RaftTerm >= term {
			best, term = i, st.RaftTerm
		}
	}
	if best < 0 {
		return -1, errors.New("etcdtest: no member reports itself as the leader")
	}
	return best, nil
}

// Compact compacts the key-value history of the cluster at its current
// revision, which it returns: a watch from an older revision is cancelled
// with ErrCompacted (rpctypes) from then on.
func (c *Cluster) Compact(ctx context.Context) (int64, error) {
	cli, err := c.adminClient()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	r, err := cli.Get(ctx, "compact-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	rev := r.Header.Revision
	if _, err := cli.Compact(ctx, rev); err != nil {
		return 0, err
	}
	return rev, nil
}

// LogTail returns the end of member i's log, for diagnostics.
func (c *Cluster) LogTail(i int) string {
	if i < 0 || i >= len(c.members) {
		return ""
	}
	return logTail(c.dir + "/" + c.members[i].name + "/etcd.log")
}

// pid returns member i's process ID, or 0 while it is killed.
func (c *Cluster) pid(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.members[i].proc; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}
