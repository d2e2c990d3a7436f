package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Watch delivers the group at once (as Members reads it) and after each
// change, as whole Views in etcd's order (recipe.Group.Watch): a read of the
// range, then a watch from the next revision whose event batches it
// applies; a View's Rev is the revision of its last change. Coalesced, never
// going back, no View without a change; compaction and failed watches are
// recovered by reading again (package documentation). The channel closes
// when ctx ends, the Session closes, or reading fails for good (logged).
func (gr *Group) Watch(ctx context.Context) <-chan recipe.View {
	if ctx == nil {
		ctx = context.Background()
	}
	out := make(chan recipe.View, 1)
	s := gr.s
	wctx, cancel := s.life.Bind(ctx)
	if !s.life.Go(func() {
		defer close(out)
		defer cancel()
		w := &watcher{gr: gr, out: out}
		w.run(wctx)
	}) {
		cancel()
		close(out)
	}
	return out
}

// watcher is one Watch.
type watcher struct {
	gr   *Group
	out  chan recipe.View
	last *recipe.View // the last View delivered
}

// Why a watch of the group's range was given up for a new read.
var (
	errCompacted     = errors.New("etcdlock: group watch: compacted")
	errWatchClosed   = errors.New("etcdlock: group watch: closed")
	errWatchCanceled = errors.New("etcdlock: group watch: cancelled by the server")
	errSilentChange  = errors.New("etcdlock: group watch: silent while the group changed")
)

// run reads and follows the group until ctx ends or a read fails for good.
func (w *watcher) run(ctx context.Context) {
	gr := w.gr
	log := gr.s.log.With("group", gr.name)
	b := loop.BackOff(retryFirst, retryMax)
	for {
		st, err := gr.list(ctx)
		if err == nil {
			w.deliver(st)
			err = w.follow(ctx, st)
		}
		switch {
		case ctx.Err() != nil:
			return
		case recipe.Permanent(err):
			log.Error("etcdlock: group watch: reading the group failed for good; closing", "err", err)
			return
		case errors.Is(err, errCompacted):
			log.Debug("etcdlock: group watch: compacted; reading the group again", "err", err)
			b.Reset()
			continue
		}
		log.Warn("etcdlock: group watch: reading the group again", "err", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			return
		}
	}
}

// follow watches the group's range from the revision after st's, applying
// each batch of events to st and delivering it, until ctx ends (nil) or
// the watch does not do any more (why).
func (w *watcher) follow(ctx context.Context, st *groupState) error {
	s := w.gr.s
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := s.cli.Watch(wctx, w.gr.dir, clientv3.WithPrefix(), clientv3.WithRev(st.rev+1))
	limit := silentWatchLimit(s.TTL())
	silent := time.NewTimer(limit)
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case wr, ok := <-ch:
			switch {
			case !ok:
				return errWatchClosed
			case wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted):
				return fmt.Errorf("%w at revision %d", errCompacted, wr.CompactRevision)
			case wr.Err() != nil:
				return wr.Err()
			case wr.Canceled:
				return errWatchCanceled
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					st.remove(ev.Kv.Key)
				} else {
					st.put(ev.Kv.Key, ev.Kv.Value, ev.Kv.CreateRevision)
				}
				st.rev = ev.Kv.ModRevision
			}
			if len(wr.Events) > 0 {
				w.deliver(st)
			}
		case <-silent.C:
			if err := w.unchanged(ctx, st); err != nil {
				return err
			}
		}
		silent.Reset(limit)
	}
}

// unchanged checks, with one count-only read, that the group's range holds
// as many keys as st and none written after st's revision; otherwise the
// watch missed a change (or is about to deliver it): errSilentChange.
func (w *watcher) unchanged(ctx context.Context, st *groupState) error {
	s, dir := w.gr.s, w.gr.dir
	var resp *clientv3.TxnResponse
	_, err := try(ctx, attemptTimeout(s.cfg.ttl), func(ctx context.Context) (err error) {
		// The newest key by mod revision: a count with WithMinModRev
		// counts the whole range (etcd filters the keys, not the count).
		resp, err = s.cli.Txn(ctx).Then(clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1),
				clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend))).Commit()
		return err
	})
	if err != nil {
		return err
	}
	newest := resp.Responses[1].GetResponseRange().Kvs
	if resp.Responses[0].GetResponseRange().Count != int64(len(st.keys)) || len(newest) > 0 && newest[0].ModRevision > st.rev {
		return errSilentChange
	}
	return nil
}

// deliver gives st's View to the reader, replacing one not read yet,
// unless it would show no change or go back in revisions.
func (w *watcher) deliver(st *groupState) {
	v := st.view()
	if l := w.last; l != nil && (v.Rev < l.Rev || slices.EqualFunc(v.Members, l.Members, sameMember)) {
		return
	}
	w.last = &v
	select {
	case <-w.out: // not read yet: the newer one replaces it
	default:
	}
	w.out <- st.view() // a copy the reader may change; never blocks: this goroutine is the only sender, and the buffer is empty
}

// sameMember reports whether a and b show the same registration and data.
func sameMember(a, b recipe.MemberInfo) bool {
	return a.ID == b.ID && a.Since == b.Since && string(a.Data) == string(b.Data)
}
