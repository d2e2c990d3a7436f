package etcdlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// registrar is the member.Registrar of one member of a Group: its key,
// claimed in the Session (Session.claim) from Join until Remove, so that a
// key under the Session's own etcd lease can only be this registrar's.
type registrar struct {
	gr  *Group
	key string

	// slot is held by a Register, and by the cleanup of a failed one that
	// goes on in the background: a Register never races with the delete of
	// a key an earlier one may have made.
	slot chan struct{}

	mu       sync.Mutex
	w        written // what this member last wrote, on its registration w.rev
	closed   bool    // Remove (or a failed Join) was called
	released bool    // the claim was given back
}

// written is what a member knows of its key: its create revision (the
// registration's), the mod revision and version of the member's last
// confirmed write, and the data of writes sent since whose outcome is
// unknown (each compared with mod: at most one of them was applied).
type written struct {
	rev, mod, ver int64
	pending       [][]byte
}

// newRegistrar returns the registrar of member id of gr (not claimed yet).
func newRegistrar(gr *Group, id string) *registrar {
	return &registrar{gr: gr, key: gr.dir + id, slot: make(chan struct{}, 1)}
}

// putResult is the outcome of one registration's put: kv is the key as
// the transaction left it; existed reports that it found the key, not made
// it.
type putResult struct {
	kv      *mvccpb.KeyValue
	existed bool
	unsure  bool // a try went unanswered or failed: it may have been applied
	err     error
}

// Register puts the member's key under the Session's current etcd lease,
// when it does not exist, in one transaction (see Group). A key found under
// that lease is this member's own: the put of an earlier try whose answer
// was lost (adopted, if nothing wrote it since), or the leftover of an
// earlier registration (deleted, then the put is sent again). A key under
// another etcd lease is recipe.ErrMemberExists. Its errors leave nothing
// behind, as Mutex.Acquire's: a put in flight when ctx ends is waited for
// (within the cleanup bound) and its key deleted.
func (r *registrar) Register(ctx context.Context, data []byte) (recipe.Lease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	select {
	case r.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	kept := false // the slot went to a cleanup in the background
	defer func() {
		if !kept {
			r.freeSlot()
		}
	}()
	s := r.gr.s
	g, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	for leftovers := 0; ; leftovers++ {
		done := make(chan putResult, 1)
		failing := make(chan struct{})
		if !s.life.Go(func() { done <- r.put(g, data, failing) }) {
			return nil, recipe.ErrSessionClosed
		}
		var p putResult
		select {
		case p = <-done:
		case <-ctx.Done():
			kept = r.abandon(g, done, failing)
			return nil, context.Cause(ctx)
		}
		switch {
		case p.err != nil:
			if p.unsure {
				kept = r.discard(g, 0) // 0: the key if under g's etcd lease, which only we put there
			}
			return nil, p.err
		case !p.existed:
		case clientv3.LeaseID(p.kv.Lease) != g.id:
			return nil, fmt.Errorf("%w: %s (under etcd lease %x)", recipe.ErrMemberExists, r.key, p.kv.Lease)
		case !p.unsure || p.kv.Version != 1 || !bytes.Equal(p.kv.Value, data):
			// Not our put's (or written since): a leftover of ours, from an
			// earlier registration whose delete is not confirmed yet.
			if leftovers == 2 {
				return nil, fmt.Errorf("%w: %s (put again and again under this Session's etcd lease)", recipe.ErrMemberExists, r.key)
			}
			if err := s.deleteOwned(ctx, g, r.key, p.kv.CreateRevision); err != nil {
				kept = r.discard(g, p.kv.CreateRevision)
				return nil, err
			}
			continue
		}
		return r.grant(ctx, g, p.kv)
	}
}

// put is one registration's transaction, sent again after every transient
// error until an answer comes, g's etcd lease is lost or the Session
// closes; failing is closed at the first transient error.
func (r *registrar) put(g *generation, data []byte, failing chan struct{}) putResult {
	s := r.gr.s
	ctx, cancel := s.life.Bind(g.ctx)
	defer cancel()
	var resp *clientv3.TxnResponse
	txn := func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0)).
			Then(clientv3.OpPut(r.key, string(data), clientv3.WithLease(g.id)), clientv3.OpGet(r.key)).
			Else(clientv3.OpGet(r.key)).Commit()
		return err
	}
	b := loop.BackOff(retryFirst, retryMax)
	unsure, closed := false, false
	for {
		unanswered, err := try(ctx, attemptTimeout(g.ttl), txn)
		if err == nil {
			i := 0
			if resp.Succeeded {
				i = 1
			}
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) == 0 { // deleted by someone at once: an answer all the same
				return putResult{unsure: unsure, err: fmt.Errorf("%w: %s (deleted as it was put)", recipe.ErrNodeDeleted, r.key)}
			}
			return putResult{kv: kvs[0], existed: !resp.Succeeded, unsure: unsure}
		}
		switch {
		case unanswered:
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			g.lose(fmt.Errorf("%w: etcd lease %x is gone (a put under it was refused)", recipe.ErrSessionLost, int64(g.id)))
			return putResult{err: lostError(context.Cause(g.ctx))}
		case ctx.Err() != nil: // a key the put may have made goes with the lease
			return putResult{err: lostError(context.Cause(ctx))}
		case !transient(err):
			return putResult{unsure: unsure, err: opError("put", r.key, err)}
		}
		if !unsure {
			unsure = true
		}
		if !unanswered && !closed {
			closed = true // not for a try left unanswered: see attempt.create
			close(failing)
		}
		if !unanswered && loop.Pause(ctx, b, retryMax) != nil {
			return putResult{err: lostError(context.Cause(ctx))}
		}
	}
}

// grant makes the registration kv a lease under g, watching its key, and
// records it as what the member last wrote.
func (r *registrar) grant(ctx context.Context, g *generation, kv *mvccpb.KeyValue) (recipe.Lease, error) {
	s := r.gr.s
	if !s.life.Enter() {
		return nil, recipe.ErrSessionClosed
	}
	l := &lease{s: s, g: g, key: r.key, rev: kv.CreateRevision}
	l.Init(ctx, fence.Token(kv.CreateRevision), r.gr.rep)
	if !g.add(l) {
		s.life.Exit()
		return nil, lostError(context.Cause(g.ctx)) // the key goes with the etcd lease
	}
	r.mu.Lock()
	r.w = written{rev: kv.CreateRevision, mod: kv.ModRevision, ver: kv.Version}
	r.mu.Unlock()
	go func() {
		defer s.life.Exit()
		l.watchOwn()
	}()
	return l, nil
}

// abandon finishes a Register whose caller stopped waiting while its put
// was in flight, as Mutex's abandon does: it waits for the answer (until
// the put's first transient error, or the cleanup timeout) and deletes the
// key the put made; what is left goes on in the background, holding the
// slot. It reports whether it did so.
func (r *registrar) abandon(g *generation, done <-chan putResult, failing <-chan struct{}) bool {
	finish := func(p putResult) bool {
		switch {
		case p.err != nil && p.unsure:
			return r.discard(g, 0)
		case p.err == nil && !p.existed:
			return r.discard(g, p.kv.CreateRevision)
		case p.err == nil && clientv3.LeaseID(p.kv.Lease) == g.id && p.unsure:
			return r.discard(g, p.kv.CreateRevision) // our own put, its answer lost
		}
		return false
	}
	t := time.NewTimer(g.cleanupTimeout())
	defer t.Stop()
	select {
	case p := <-done:
		return finish(p)
	case <-failing:
	case <-t.C:
	}
	return r.gr.s.life.Go(func() {
		if !finish(<-done) {
			r.freeSlot()
		}
	})
}

// discard deletes the member's key of create revision rev (0: the key if
// under g's etcd lease) after a failed registration (deleteOwned), and
// reports whether the delete goes on in the background, holding the slot
// until it is confirmed or the etcd lease is lost (the key goes with it).
func (r *registrar) discard(g *generation, rev int64) bool {
	s := r.gr.s
	if g.ctx.Err() != nil || s.deleteOwned(context.Background(), g, r.key, rev) == nil {
		return false
	}
	return s.life.Go(func() {
		defer r.freeSlot()
		ctx, cancel := s.life.Bind(g.ctx)
		defer cancel()
		b := loop.BackOff(retryFirst, retryMax)
		for s.deleteOwned(ctx, g, r.key, rev) != nil && ctx.Err() == nil {
			if loop.Pause(ctx, b, retryMax) != nil {
				return
			}
		}
	})
}

// freeSlot gives the slot back, or, after Remove, gives the claim back
// instead (keeping the slot: no registration follows).
func (r *registrar) freeSlot() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.unclaimLocked()
		return
	}
	<-r.slot
}

// finish ends the registrar: the claim is given back now, or by the
// cleanup that holds the slot when it ends.
func (r *registrar) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	select {
	case r.slot <- struct{}{}:
		r.unclaimLocked()
	default:
	}
}

// unclaimLocked gives the claim on the key back, once (r.mu held).
func (r *registrar) unclaimLocked() {
	if !r.released {
		r.released = true
		r.gr.s.unclaim(r.key)
	}
}

// Remove is the registrar's end, after Leave released the last
// registration (whose Release deleted the key comparing its create
// revision): nothing is left to delete but what a failed registration's
// cleanup still deletes in the background; the claim on the id in the
// Session is given back once that is done. Idempotent; it returns nil.
func (r *registrar) Remove(context.Context) error {
	r.finish()
	return nil
}
