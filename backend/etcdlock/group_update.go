package etcdlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Update writes data on the member's live registration l: one transaction
// that puts data under l's etcd lease if the key is still l's incarnation
// (its create revision) and its mod revision is that of the member's last
// confirmed write.
//
// A try whose answer is lost (unanswered, a transient error, ctx's end
// while in flight) is sent again as the same transaction, and its data
// kept as pending: its outcome is settled by the next answer, of this call
// or of a later Update, by this rule. The key failing the comparison
// holds a write of this member's when all of these hold: same create
// revision, same etcd lease, version exactly one more than that of the
// last confirmed write (one write since: a second one, ours or not, would
// make it two) and the value of one of the pending writes (which all
// compared the same mod revision, so at most one of them was applied). If
// a foreign write matches it too, the key holds exactly what our write
// would have made, written once since our last write, so calling it ours
// overwrites nothing and hides nothing. Otherwise someone else wrote the
// key since the member's last confirmed write: recipe.ErrConflict, and the
// key is left as it is. A key deleted, or made again, ends the
// registration (its context's cause, recipe.ErrNodeDeleted, or
// recipe.ErrSessionLost if the etcd lease went). When no answer comes
// before ctx ends, the error is a *recipe.OpError wrapping ctx's cause:
// the outcome is unknown, and the next Update settles it.
func (r *registrar) Update(ctx context.Context, l recipe.Lease, data []byte) error {
	if err := checkData(data); err != nil {
		return err
	}
	ml, ok := l.(*lease)
	if !ok || ml.key != r.key {
		return fmt.Errorf("%w: etcdlock: Update of member %s with a lease of another registration", recipe.ErrBadOption, r.key)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	s, g := r.gr.s, ml.g
	ctx, cancel := s.life.Bind(ctx)
	defer cancel()
	ctx, cancel2 := ctxend.Also(ctx, ml.Context())
	defer cancel2()
	b := loop.BackOff(retryFirst, retryMax)
	for {
		w, err := r.pend(ml, data)
		if err != nil {
			return err
		}
		var resp *clientv3.TxnResponse
		unanswered, err := try(ctx, attemptTimeout(g.ttl), func(ctx context.Context) (err error) {
			resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", w.rev),
				clientv3.Compare(clientv3.ModRevision(r.key), "=", w.mod)).
				Then(clientv3.OpPut(r.key, string(data), clientv3.WithLease(g.id)), clientv3.OpGet(r.key)).
				Else(clientv3.OpGet(r.key)).Commit()
			return err
		})
		if err == nil {
			done, err := r.settle(ctx, ml, resp, data)
			if done {
				return err
			}
			b.Reset()
			continue // a pending write was applied: compare with it now
		}
		switch {
		case ml.Context().Err() != nil:
			return context.Cause(ml.Context())
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			g.lose(fmt.Errorf("%w: etcd lease %x is gone (an update under it was refused)", recipe.ErrSessionLost, int64(g.id)))
			return context.Cause(ml.Context())
		case ctx.Err() != nil:
			return opError("update", r.key, fmt.Errorf("unconfirmed (the next Update settles it): %w", context.Cause(ctx)))
		case unanswered:
			continue
		case !transient(err):
			return opError("update", r.key, err)
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return opError("update", r.key, fmt.Errorf("unconfirmed (the next Update settles it): %w", context.Cause(ctx)))
		}
	}
}

// pend records data as a pending write of registration l, and returns what
// the member knows of its key.
func (r *registrar) pend(l *lease, data []byte) (written, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w.rev != l.rev {
		return written{}, fmt.Errorf("%w: etcdlock: member %s registered again meanwhile", recipe.ErrLeaseLost, r.key)
	}
	if !slices.ContainsFunc(r.w.pending, func(p []byte) bool { return bytes.Equal(p, data) }) {
		r.w.pending = append(r.w.pending, bytes.Clone(data))
	}
	return r.w, nil
}

// settle applies the answer of an update's transaction (see Update): it
// reports done with Update's result, or not done when a pending write
// other than data was found applied (the member's state moved to it: send
// data again, compared with it).
func (r *registrar) settle(ctx context.Context, l *lease, resp *clientv3.TxnResponse, data []byte) (done bool, err error) {
	r.mu.Lock()
	if resp.Succeeded {
		kv := resp.Responses[1].GetResponseRange().Kvs[0]
		r.w.mod, r.w.ver, r.w.pending = kv.ModRevision, kv.Version, nil
		r.mu.Unlock()
		return true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || kvs[0].CreateRevision != r.w.rev {
		r.mu.Unlock()
		l.lostKey(ctx) // the key went with the etcd lease, or was deleted by someone else
		return true, context.Cause(l.Context())
	}
	defer r.mu.Unlock()
	kv := kvs[0]
	if kv.Version == r.w.ver+1 && clientv3.LeaseID(kv.Lease) == l.g.id &&
		slices.ContainsFunc(r.w.pending, func(p []byte) bool { return bytes.Equal(p, kv.Value) }) {
		r.w.mod, r.w.ver, r.w.pending = kv.ModRevision, kv.Version, nil
		return bytes.Equal(kv.Value, data), nil
	}
	return true, fmt.Errorf("%w: member key %s (mod revision %d, version %d; this member last wrote mod revision %d, version %d)",
		recipe.ErrConflict, r.key, kv.ModRevision, kv.Version, r.w.mod, r.w.ver)
}
