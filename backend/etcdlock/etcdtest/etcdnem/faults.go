package etcdnem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// Fault kinds of etcd's Target, beside the engine's generic client faults.
const (
	FaultKillMember  = "kill-member"      // SIGKILL a random member, restart it (same data) after d
	FaultKillLeader  = "kill-leader"      // SIGKILL the leader, restart it after d
	FaultPauseMember = "pause-member"     // SIGSTOP a member (the leader half the time) past the election timeout, then SIGCONT
	FaultPartition   = "partition-member" // cut a member (the leader half the time) off from the others and from clients for d
	FaultCompact     = "compact"          // compact the history at the current revision while waiters watch
	FaultRevoke      = "revoke-lease"     // revoke the holder's etcd lease from an administrator client
)

// electionTimeout is etcd's default (the harness keeps it): a member
// stopped or cut off for longer loses its leadership.
const electionTimeout = time.Second

// Faults lists the server faults (one at a time: each needs the other two
// members to keep a majority), the compaction and the revocation.
func (t *Target) Faults() []nemesis.FaultKind {
	return []nemesis.FaultKind{
		{Name: FaultKillMember, Scope: nemesis.ScopeServer, Inject: t.killMember(false)},
		{Name: FaultKillLeader, Scope: nemesis.ScopeServer, Inject: t.killMember(true)},
		{Name: FaultPauseMember, Scope: nemesis.ScopeServer, Inject: t.pauseMember},
		{Name: FaultPartition, Scope: nemesis.ScopeServer, Inject: t.partition},
		{Name: FaultCompact, Scope: nemesis.ScopeStore, Inject: t.compact},
		{Name: FaultRevoke, Scope: nemesis.ScopeStore, Inject: t.revoke},
	}
}

// pick returns the leader when leader (or, for pause and partition, half
// the time as drawn by rng), else a member drawn by rng.
func (t *Target) pick(ctx context.Context, leader bool, rng *rand.Rand) (int, error) {
	i := rng.IntN(t.c.Size())
	if !leader {
		return i, nil
	}
	return t.c.Leader(ctx)
}

func (t *Target) killMember(leader bool) func(context.Context, *nemesis.Fault, time.Duration, *rand.Rand) {
	return func(ctx context.Context, f *nemesis.Fault, d time.Duration, rng *rand.Rand) {
		i, err := t.pick(ctx, leader, rng)
		if err != nil {
			f.Target, f.Err = "no leader", err.Error()
			return
		}
		f.Target = fmt.Sprintf("member %d", i)
		if err := t.c.Kill(i); err != nil {
			f.Err = err.Error()
			return
		}
		_ = loop.Sleep(ctx, d)
		// The restart runs to its end even when ctx ended: a member left
		// down would make the next faults take the majority away.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if err := t.c.Restart(rctx, i); err != nil {
			f.Err = "restart: " + err.Error()
		}
	}
}

// pauseMember stops a member for d, and at least 1.5 election timeouts so
// that the others notice (a stopped leader is replaced).
func (t *Target) pauseMember(ctx context.Context, f *nemesis.Fault, d time.Duration, rng *rand.Rand) {
	i, err := t.pick(ctx, rng.IntN(2) == 0, rng)
	if err != nil {
		f.Target, f.Err = "no leader", err.Error()
		return
	}
	f.Target = fmt.Sprintf("member %d", i)
	if err := t.c.Pause(i); err != nil {
		f.Err = err.Error()
		_ = t.c.Resume(i)
		return
	}
	_ = loop.Sleep(ctx, max(d, electionTimeout*3/2))
	if err := t.c.Resume(i); err != nil {
		f.Err = err.Error()
	}
}

// partition cuts a member off from the other members and from every
// client for d.
func (t *Target) partition(ctx context.Context, f *nemesis.Fault, d time.Duration, rng *rand.Rand) {
	i, err := t.pick(ctx, rng.IntN(2) == 0, rng)
	if err != nil {
		f.Target, f.Err = "no leader", err.Error()
		return
	}
	f.Target = fmt.Sprintf("member %d", i)
	if err := t.c.Partition(i); err != nil {
		f.Err = err.Error()
	}
	_ = loop.Sleep(ctx, d)
	t.c.Heal()
}

// compact compacts the history at the current revision: a waiter whose
// watch starts from an older revision is refused (ErrCompacted) and must
// read again.
func (t *Target) compact(ctx context.Context, f *nemesis.Fault, _ time.Duration, _ *rand.Rand) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rev, err := t.c.Compact(cctx)
	f.Target = fmt.Sprintf("revision %d", rev)
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		f.Target = "already compacted" // no write since the last compaction
	case err != nil:
		f.Err = err.Error()
	}
}

// revoke revokes the etcd lease of the lock's holder (the key with the
// lowest create revision) from the administrator client, as an operator
// or an attacker on an unauthenticated network could: etcd deletes every
// key of the lease, and the next contender is let in at once while the
// holder learns of it only from its watch or its next keep-alive.
//
// Below is exact: the revoke's deletions are one revision R; the lock's
// first key at R-1 (read from the history) is the only key granted then,
// and if it was under the revoked lease and is gone at R, every key with a
// create revision up to it was gone at R (no key of a lower create
// revision can appear later), so every grant with a token below its create
// revision + 1 was removed. Keys of that lease that were not first were
// waiters, never granted.
func (t *Target) revoke(ctx context.Context, f *nemesis.Fault, _ time.Duration, _ *rand.Rand) {
	phase := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	admin, err := t.adminClient()
	if err != nil {
		f.Err = err.Error()
		return
	}
	defer admin.Close()
	t.mu.Lock()
	lock := t.base + "/lock/_lock_"
	t.mu.Unlock()
	lease, r, err := revokeHolder(phase, ctx, admin, lock)
	switch {
	case lease == 0:
		f.Target, f.Err = "no holder", err.Error()
		return
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		f.Target, f.Err = fmt.Sprintf("lease %x", lease), err.Error() // nothing taken
		return
	}
	f.Target, f.Revokes = fmt.Sprintf("lease %x", lease), true
	if err != nil {
		f.Err = err.Error() // the revoke may or may not have been applied
		return
	}
	f.Certain = true
	below, err := removedBelow(ctx, admin, lock, lease, r.Header.Revision)
	if err != nil {
		f.Err = err.Error() // certain, but which grants it took is unknown: Below stays 0
		return
	}
	if below == 0 {
		f.Revokes, f.Certain = false, false // the lease held no grant at the revoke
		return
	}
	f.Below = below
	f.Target += fmt.Sprintf(" (key of revision %d)", below-1)
}

// holderWait bounds how long revoke looks for a holder whose lease it can
// revoke: the lock is often free for a moment between grants (and longer
// under the other faults), and a holder's lease can expire between the
// read and the revoke, so a revoke that tried once would often take
// nothing, and a short run might never revoke a holder.
const holderWait = 3 * time.Second

// revokeHolder revokes the etcd lease of the lock's first key: it looks
// for one (awaitHolder), and tries the next holder while the revoke finds
// the lease gone (expired, or revoked by its Session), until holderWait
// has passed. It returns the lease it tried last (0: none found).
func revokeHolder(phase, ctx context.Context, admin *clientv3.Client, lock string) (clientv3.LeaseID, *clientv3.LeaseRevokeResponse, error) {
	end := time.Now().Add(holderWait)
	for {
		lease, err := awaitHolder(phase, ctx, admin, lock, end)
		if err != nil {
			return 0, nil, err
		}
		r, err := admin.Revoke(ctx, lease)
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) || time.Now().After(end) || phase.Err() != nil {
			return lease, r, err
		}
	}
}

// awaitHolder returns the etcd lease of the lock's first key, reading
// again every 50 ms while the lock has none, until end and while phase
// (the fault phase) lives; its reads are under ctx.
func awaitHolder(phase, ctx context.Context, admin *clientv3.Client, lock string, end time.Time) (clientv3.LeaseID, error) {
	for {
		first, err := admin.Get(ctx, lock, clientv3.WithFirstCreate()...)
		switch {
		case err != nil:
			return 0, fmt.Errorf("reading the lock's holder: %w", err)
		case len(first.Kvs) > 0 && first.Kvs[0].Lease != 0:
			return clientv3.LeaseID(first.Kvs[0].Lease), nil
		case time.Now().After(end) || phase.Err() != nil:
			return 0, fmt.Errorf("no holder's lease to revoke within %v", holderWait)
		}
		_ = loop.Sleep(phase, 50*time.Millisecond)
	}
}

// removedBelow returns the create revision + 1 of the lock's first key at
// rev-1 if it was under lease and is gone at rev; 0 if the first key at
// rev-1 was another lease's (or none).
func removedBelow(ctx context.Context, admin *clientv3.Client, lock string, lease clientv3.LeaseID, rev int64) (fence.Token, error) {
	before, err := admin.Get(ctx, lock, append(clientv3.WithFirstCreate(), clientv3.WithRev(rev-1))...)
	if err != nil {
		return 0, fmt.Errorf("reading the lock before the revoke: %w", err)
	}
	if len(before.Kvs) == 0 || clientv3.LeaseID(before.Kvs[0].Lease) != lease {
		return 0, nil
	}
	kv := before.Kvs[0]
	after, err := admin.Get(ctx, string(kv.Key), clientv3.WithRev(rev))
	if err != nil {
		return 0, fmt.Errorf("reading the lock after the revoke: %w", err)
	}
	if len(after.Kvs) > 0 && after.Kvs[0].CreateRevision == kv.CreateRevision {
		return 0, fmt.Errorf("the holder's key of revision %d outlived the revoke of its lease", kv.CreateRevision)
	}
	return fence.Token(kv.CreateRevision + 1), nil
}
