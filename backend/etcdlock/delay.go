package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MutexOption configures a Mutex (New).
type MutexOption func(*Mutex)

// WithLockDelay sets the Mutex's lock-delay to d, with the contract of
// every backend's option (recipe.MaxLockDelay). The record is two keys in
// the lock's range, which a Session's credentials therefore need whole:
// <prefix>/<name>/_lockdelay_held names the holder's key, written with its
// grant and deleted in its Release's transaction; _lockdelay_serving, under
// an etcd lease of d rounded up to seconds, keeps a delay being served. The
// delay runs from a contender's first sight of the gone holder: one that
// arrives late serves a whole d (docs/lock-delay.md#lock-delay-on-etcd).
func WithLockDelay(d time.Duration) MutexOption { return func(m *Mutex) { m.delay = d } }

// The lock-delay's keys of the lock named N, beside its contenders' keys
// <prefix>/N/_lock_<guid> and outside their range (no element of a name
// starts with "_lock_", so no lock's key or range holds them):
//
//   - <prefix>/N/_lockdelay_held: the key of the contender whose grant was
//     handed out, with no etcd lease: it outlives an unclean end. A clean
//     Release deletes it in the transaction that deletes its key; the
//     next holder overwrites it (or turns it into the serving key).
//   - <prefix>/N/_lockdelay_serving: a delay is being served; under an
//     etcd lease of its own with a TTL of the delay, so it ends on the
//     server's clock even if nobody is left to serve it, and the next
//     holder deletes it with its grant.
const (
	heldKey    = "_lockdelay_held"
	servingKey = "_lockdelay_serving"
)

// delayKeys sets the keys of m's lock-delay from its directory.
func (m *Mutex) delayKeys() {
	base := strings.TrimSuffix(m.dir, marker)
	m.held, m.serving = base+heldKey, base+servingKey
}

// delayState is what a contender read of the lock-delay's keys, at one
// revision: the held and serving keys (nil when absent).
type delayState struct {
	rev     int64
	held    *mvccpb.KeyValue
	serving *mvccpb.KeyValue
}

// delayReads are the reads appended to a contender's transactions when the
// lock has a delay (none without: no cost for a lock without the option).
func (m *Mutex) delayReads() []clientv3.Op {
	if m.delay <= 0 {
		return nil
	}
	return []clientv3.Op{clientv3.OpGet(m.held), clientv3.OpGet(m.serving)}
}

// parseDelay reads the answers of delayReads at rs[i:] of a transaction at
// revision rev.
func parseDelay(rev int64, rs []*etcdserverpb.ResponseOp, i int) delayState {
	st := delayState{rev: rev}
	if i+1 >= len(rs) {
		return st
	}
	if kvs := rs[i].GetResponseRange().Kvs; len(kvs) > 0 {
		st.held = kvs[0]
	}
	if kvs := rs[i+1].GetResponseRange().Kvs; len(kvs) > 0 {
		st.serving = kvs[0]
	}
	return st
}

// markOp is the nested transaction of an uncontended Acquire's put: it
// records the grant as held in the same transaction when the lock had no
// key and no record (compares are evaluated before the put of the
// contender's own key), so an uncontended grant stays one request.
func (m *Mutex) markOp(key string) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(m.dir), "=", 0).WithPrefix(),
		clientv3.Compare(clientv3.CreateRevision(m.held), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(m.serving), "=", 0),
	}, []clientv3.Op{clientv3.OpPut(m.held, key)}, nil)
}

// releaseOps are the operations added to the delete of key (Release, and
// a failed acquisition's cleanup): the held record goes with the key when
// it names it. Nil without the option: no cost.
func (m *Mutex) releaseOps(key string) []clientv3.Op {
	if m.delay <= 0 {
		return nil
	}
	return []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(m.held), "=", key)},
		[]clientv3.Op{clientv3.OpDelete(m.held)}, nil)}
}

// serveDelay is what a contender first in line does before its grant is
// handed out, from the state st it read when it found itself first: it
// serves what remains of a lock-delay, then records itself as the holder
// (mark). It returns the delay it served (0 for none). The delay runs from
// its first sight of the gone holder, whose key both keys name.
//
//   - held names its own key: recorded already (a retry after a lost
//     answer); nothing to serve.
//   - held names another key, and no delay is being served: that holder
//     ended uncleanly (it is not in line: its key is gone). The contender
//     turns the record into a serving key under an etcd lease of d
//     (startDelay), then waits d from when it saw the record.
//   - serving exists (not its own): a delay that another contender began
//     and gave up: it waits until the key goes (its etcd lease's end, the
//     original end) or d after it saw it, whichever comes first.
//   - neither: nothing to serve.
func (a *attempt) serveDelay(ctx context.Context, st delayState) (_ time.Duration, err error) {
	defer func() {
		if err != nil && a.g.ctx.Err() != nil { // the etcd lease's loss, not the caller's
			err = lostError(context.Cause(a.g.ctx))
		}
	}()
	ctx, cancel := a.g.bind(ctx)
	defer cancel()
	w := grant.NewServing(a.m.rep, a.m.delay)
	var seen grant.Sight
	var own clientv3.LeaseID
	for {
		switch {
		case st.held != nil && string(st.held.Value) == a.key:
			return w.Served(), nil
		case st.held != nil && st.serving == nil:
			seen.Left(string(st.held.Value), a.m.delay) // the delay starts
			if own, err = a.m.startDelay(ctx, a.g, st.held, clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.rev)); err != nil {
				return 0, err
			}
			if st, err = a.readDelay(ctx); err != nil {
				return 0, err
			}
			continue
		case st.serving != nil:
			mine := own != 0 && clientv3.LeaseID(st.serving.Lease) == own
			ended, err := a.serve(ctx, w, seen.Left(string(st.serving.Value), a.m.delay), st.rev, !mine)
			if err != nil {
				return 0, err
			}
			if !ended { // a key went: read again
				if st, err = a.readDelay(ctx); err != nil {
					return 0, err
				}
				continue
			}
		}
		marked, err := a.mark(ctx)
		if err != nil || marked {
			return w.Served(), err
		}
		if st, err = a.readDelay(ctx); err != nil { // the own key went: says why
			return 0, err
		}
	}
}

// errRecheck ends a wait of serve when a watched key is deleted.
var errRecheck = errors.New("etcdlock: a key of the lock-delay changed")

// serve waits rest through w, or until the attempt's own key or, if
// watchServing, the serving key is deleted after revision rev (not ended:
// the caller reads again). Errors: ctx's cause (which also ends with the
// etcd lease).
func (a *attempt) serve(ctx context.Context, w *grant.Serving, rest time.Duration, rev int64, watchServing bool) (ended bool, err error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lctx := clientv3.WithRequireLeader(wctx)
		opts := []clientv3.OpOption{clientv3.WithRev(rev + 1), clientv3.WithFilterPut()}
		cli := a.m.s.cli
		own := cli.Watch(lctx, a.key, opts...)
		var serving clientv3.WatchChan // nil: never ready
		if watchServing {
			serving = cli.Watch(lctx, a.m.serving, opts...)
		}
		select {
		case <-own:
		case <-serving:
		case <-wctx.Done():
			return
		}
		cancel(errRecheck)
	}()
	err = w.Wait(wctx, rest)
	cancel(nil)
	<-done
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() == nil && errors.Is(err, errRecheck):
		return false, nil
	}
	return false, err
}

// readDelay reads the attempt's own key and the lock-delay's keys at one
// revision. Its own key gone (or another incarnation) returns
// recipe.ErrNodeDeleted, or the etcd lease's loss if it went with it.
func (a *attempt) readDelay(ctx context.Context) (delayState, error) {
	var resp *clientv3.TxnResponse
	err := a.m.s.retry(ctx, a.g, "get", a.m.held, func(ctx context.Context) (err error) {
		resp, err = a.m.s.cli.Txn(ctx).Then(append([]clientv3.Op{clientv3.OpGet(a.key, clientv3.WithKeysOnly())}, a.m.delayReads()...)...).Commit()
		return err
	})
	if err != nil {
		return delayState{}, err
	}
	if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != a.rev {
		if a.g.gone(ctx) {
			return delayState{}, lostError(context.Cause(a.g.ctx))
		}
		return delayState{}, fmt.Errorf("%w: %s (deleted while serving the lock-delay)", recipe.ErrNodeDeleted, a.key)
	}
	return parseDelay(resp.Header.Revision, resp.Responses, 1), nil
}

// mark records the attempt as the holder, and ends the delay it served
// (the serving key goes), if its own key is still there: the step that
// makes a later end of this grant without Release an unclean one. It is
// sent before the grant is handed out.
func (a *attempt) mark(ctx context.Context) (bool, error) {
	var resp *clientv3.TxnResponse
	err := a.m.s.retry(ctx, a.g, "put", a.m.held, func(ctx context.Context) (err error) {
		resp, err = a.m.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.rev)).
			Then(clientv3.OpPut(a.m.held, a.key), clientv3.OpDelete(a.m.serving)).Commit()
		return err
	})
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// startDelay turns the record of a holder that ended uncleanly (held, as
// read) into the serving key, under an etcd lease of its own with the
// delay as TTL (rounded up to seconds; the server may raise it to its
// minimum), in one transaction that also compares own (the contender's
// key is there; for TryAcquire: the lock has no key). Its lease is granted
// after the caller's clock started, so the key outlives the caller's
// delay, whatever becomes of the caller. It returns the lease (0 if the
// transaction found the state changed: the caller reads again; the lease
// then expires with no key).
func (m *Mutex) startDelay(ctx context.Context, g *generation, held *mvccpb.KeyValue, own clientv3.Cmp) (clientv3.LeaseID, error) {
	ttl := int64((m.delay + time.Second - 1) / time.Second)
	var id clientv3.LeaseID
	err := m.s.retry(ctx, g, "grant", m.serving, func(ctx context.Context) error {
		resp, err := m.s.cli.Grant(ctx, ttl)
		if err == nil {
			id = resp.ID
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	var resp *clientv3.TxnResponse
	err = m.s.retry(ctx, g, "put", m.serving, func(ctx context.Context) (err error) {
		resp, err = m.s.cli.Txn(ctx).If(own,
			clientv3.Compare(clientv3.ModRevision(m.held), "=", held.ModRevision),
			clientv3.Compare(clientv3.CreateRevision(m.serving), "=", 0)).
			Then(clientv3.OpDelete(m.held), clientv3.OpPut(m.serving, string(held.Value), clientv3.WithLease(id))).Commit()
		return err
	})
	if err != nil || !resp.Succeeded {
		return 0, err
	}
	m.s.log.Debug("etcdlock: lock-delay started: the previous holder ended without releasing",
		"lock", m.name, "holder", string(held.Value), "delay", m.delay)
	return id, nil
}

// tryRefused is a TryAcquire's refusal with the lock-delay: when the lock
// has no key and no delay being served but names a holder (which ended
// uncleanly), it starts the delay, so that the lock is free again d
// later, not only once an Acquire served it.
func (m *Mutex) tryRefused(ctx context.Context, g *generation, r createResult) error {
	if m.delay <= 0 || r.first != 0 || r.st.held == nil || r.st.serving != nil {
		return nil
	}
	_, err := m.startDelay(ctx, g, r.st.held, clientv3.Compare(clientv3.CreateRevision(m.dir), "=", 0).WithPrefix())
	return err
}

// retry sends a request idempotent at the server (a read, a transaction
// that compares what it changes, a lease grant: one granted by a try
// abandoned goes with its TTL) until it is answered, ctx ends or g's etcd
// lease is lost, retrying unanswered tries and transient errors.
func (s *Session) retry(ctx context.Context, g *generation, op, key string, send func(context.Context) error) error {
	ctx, cancel := s.life.Bind(ctx)
	defer cancel()
	ctx, cancel2 := g.bind(ctx)
	defer cancel2()
	b := loop.BackOff(retryFirst, retryMax)
	for {
		unanswered, err := try(ctx, attemptTimeout(g.ttl), send)
		switch {
		case err == nil:
			return nil
		case g.ctx.Err() != nil:
			return lostError(context.Cause(g.ctx))
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case !unanswered && !transient(err):
			return opError(op, key, err)
		}
		if !unanswered && loop.Pause(ctx, b, retryMax) != nil {
			return context.Cause(ctx)
		}
	}
}
