package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// attemptTimeout bounds one try of a request that this package sends again
// when it gets no answer: max(TTL/6, 500 ms). The client spreads requests
// over its connections to every member, and a connection to a silent member
// (cut off, or stopped) stays open until gRPC's keep-alive closes it (15 s):
// a request sent there gets no answer, so it is abandoned after this bound
// and sent again, most likely to another member. Every request so bounded
// is safe to send twice: a keep-alive, a grant (a lease granted by an
// abandoned try holds no key and expires after its TTL), the put of an
// acquisition (the retry finds the key the first try made), a read, the
// delete that compares the key's create revision.
func attemptTimeout(ttl time.Duration) time.Duration {
	return max(ttl/6, 500*time.Millisecond)
}

// silentWatchLimit bounds how long a wait trusts a watch that stays silent:
// a waiter, or a holder watching its own key, reads again after a TTL
// without an event. Under faults a watch can stay registered on a live
// stream and never deliver the deletion it waits for (seen under the
// nemesis after a member's pause: a lock left free, its waiters asleep;
// etcd-io/etcd#8980 and #17611 report the kind), so one read per TTL
// bounds what such a watch costs: a grant, or the notice of a deleted key,
// comes at most a TTL late. It costs less than a Session's keep-alives.
func silentWatchLimit(ttl time.Duration) time.Duration { return ttl }

// try runs one attempt of such a request under ctx, bounded by d, and
// reports whether it went unanswered within d while ctx lives (the caller
// then sends it again), with the attempt's error.
func try(ctx context.Context, d time.Duration, send func(context.Context) error) (unanswered bool, err error) {
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err = send(actx)
	return err != nil && actx.Err() != nil && ctx.Err() == nil, err
}

// createOps are create's condition and writes. For Acquire the put is
// conditional on the key not existing; for TryAcquire, on the lock having
// no key at all. With the lock-delay, the grant is recorded as held in
// the same transaction when the lock was free with no record (for
// TryAcquire, that is its condition: a lock with a record is refused).
func (a *attempt) createOps(wait bool) ([]clientv3.Cmp, []clientv3.Op) {
	m := a.m
	put := clientv3.OpPut(a.key, a.m.s.cfg.identity, clientv3.WithLease(a.g.id)) // the value: the holder's ID (holder.go)
	switch {
	case wait && m.delay <= 0:
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0)}, []clientv3.Op{put}
	case wait:
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0)}, []clientv3.Op{put, m.markOp(a.key)}
	}
	cond := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(m.dir), "=", 0).WithPrefix()}
	if m.delay <= 0 {
		return cond, []clientv3.Op{put}
	}
	cond = append(cond, clientv3.Compare(clientv3.CreateRevision(m.held), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(m.serving), "=", 0))
	return cond, []clientv3.Op{put, clientv3.OpPut(m.held, a.key)}
}
