package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// Faults are ZooKeeper's own kinds: the server faults when the cluster's
// servers can be controlled, the expiry of a client's session on demand
// and the deletion of the recipe's directory.
func (t *zkTarget) Faults() []FaultKind {
	var kinds []FaultKind
	if err := t.cl.Resume(0); !errors.Is(err, zktest.ErrUnsupported) {
		busy := func() bool { t.mu.Lock(); defer t.mu.Unlock(); return len(t.down) > 0 }
		for _, name := range ServerFaults {
			kinds = append(kinds, FaultKind{Name: name, Scope: ScopeServer, Busy: busy,
				Inject: func(ctx context.Context, f *Fault, d time.Duration, rng *rand.Rand) { t.serverFault(ctx, f, d, rng) }})
		}
	}
	return append(kinds,
		FaultKind{Name: FaultExpire, Scope: ScopeClient, Inject: t.expire},
		FaultKind{Name: FaultDeleteDir, Scope: ScopeStore, Inject: t.deleteDir})
}

// serverFault kills, stops or pauses a random server (kill-leader: the
// leader), and restarts or continues it after d; a server whose restart
// fails stays down (Busy) until Heal.
func (t *zkTarget) serverFault(ctx context.Context, f *Fault, d time.Duration, rng *rand.Rand) {
	i := rng.IntN(len(t.cl.Addrs()))
	var errs []error
	var err error
	switch f.Kind {
	case FaultKillLeader:
		if i, err = t.cl.Leader(); err == nil {
			err = t.cl.Kill(i)
		}
	case FaultKillServer:
		err = t.cl.Kill(i)
	case FaultStopServer:
		err = t.cl.Stop(i)
	case FaultPauseServer:
		err = t.cl.Pause(i)
	}
	f.Target = fmt.Sprintf("server %d", i)
	if err != nil {
		errs = append(errs, err)
	}
	if i >= 0 {
		pause(ctx, d)
		if f.Kind == FaultPauseServer {
			err = t.cl.Resume(i)
		} else {
			err = t.cl.Restart(i)
		}
		if err != nil {
			errs = append(errs, err)
			t.mu.Lock()
			t.down[i] = true
			t.mu.Unlock()
		}
	}
	if err := errors.Join(errs...); err != nil {
		f.Err = err.Error()
	}
}

// expire expires f.Client's session on demand: its nodes go, its holder
// hears of it only when its connection tells it. Below is the zxid of the
// closeSession.
func (t *zkTarget) expire(_ context.Context, f *Fault, _ time.Duration, _ *rand.Rand) {
	f.Target, f.Revokes = fmt.Sprintf("client %d", f.Client), true
	c := t.client(f.Client)
	id, pw, ok := c.tap.Session()
	if !ok {
		f.Err, f.Revokes = "no session to expire", false
		return
	}
	f.Target += fmt.Sprintf(" session 0x%x", id)
	ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	zxid, err := zktest.ExpireSession(ectx, t.cl.Addrs(), id, pw)
	cancel()
	switch {
	case err == nil:
		f.Certain, f.Below = true, fence.Token(zxid)
	case errors.Is(err, zktest.ErrSessionGone):
		f.Err, f.Revokes = err.Error(), false
	default:
		f.Err = err.Error() // the close may or may not have been applied
	}
}

// deleteDir deletes the recipe's directory under live participants.
func (t *zkTarget) deleteDir(_ context.Context, f *Fault, _ time.Duration, _ *rand.Rand) {
	dir := t.cl.Chroot() + t.lockDir()
	f.Target, f.Revokes = dir, true
	if err := deleteAll(t.admin.conn, dir); err != nil {
		f.Err = err.Error()
		return
	}
	f.Certain = true
	// The parent's pzxid is the zxid of the deletion, or of the
	// directory's re-creation by a participant right after it: either way
	// every node created before the deletion has a smaller czxid (no node
	// can be created while the directory is missing).
	if ok, st, err := t.admin.conn.Exists(path.Dir(dir)); err == nil && ok {
		f.Below = fence.Token(st.Pzxid)
	}
}
