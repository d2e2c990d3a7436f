package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Watch delivers the value now and after each change (recipe.Value.Watch):
// a linearizable read of the key, then a watch from the next revision
// whose events it delivers (a delete as Version 0, its Rev the delete's
// revision). Coalesced (a value not taken yet is replaced by a newer one),
// never going back in Rev, no value without a change. A compacted
// revision, a failed or cancelled watch, and a watch silent for a TTL are
// recovered by reading again. The channel closes when ctx ends (a nil ctx
// never ends), the Session closes, or reading fails for good (logged).
func (v *Value) Watch(ctx context.Context) <-chan recipe.Versioned {
	if ctx == nil {
		ctx = context.Background()
	}
	out := make(chan recipe.Versioned, 1)
	s := v.s
	wctx, cancel := s.life.Bind(ctx)
	if !s.life.Go(func() {
		defer close(out)
		defer cancel()
		w := &valueWatcher{v: v, out: out}
		w.run(wctx)
	}) {
		cancel()
		close(out)
	}
	return out
}

// valueWatcher is one Watch.
type valueWatcher struct {
	v    *Value
	out  chan recipe.Versioned
	last *recipe.Versioned // the last value delivered
}

// Why a value's watch was given up for a new read.
var (
	errValueCompacted = errors.New("etcdlock: value watch: compacted")
	errValueWatch     = errors.New("etcdlock: value watch: closed or cancelled")
	errValueSilent    = errors.New("etcdlock: value watch: silent for a TTL")
)

// run reads and follows the value until ctx ends or a read fails for good.
func (w *valueWatcher) run(ctx context.Context) {
	log := w.v.s.log.With("value", w.v.name)
	b := loop.BackOff(retryFirst, retryMax)
	for {
		resp, err := w.v.get(ctx)
		if err == nil {
			w.deliver(fromGet(resp))
			err = w.follow(ctx, resp.Header.Revision)
		}
		switch {
		case ctx.Err() != nil:
			return
		case recipe.Permanent(err):
			log.Error("etcdlock: value watch: reading the value failed for good; closing", "err", err)
			return
		case errors.Is(err, errValueCompacted), errors.Is(err, errValueSilent):
			log.Debug("etcdlock: value watch: reading the value again", "err", err)
			b.Reset()
			continue
		}
		log.Warn("etcdlock: value watch: reading the value again", "err", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			return
		}
	}
}

// follow watches the key from the revision after rev, delivering each
// event, until ctx ends (nil) or the watch does not do any more (why).
func (w *valueWatcher) follow(ctx context.Context, rev int64) error {
	s := w.v.s
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := s.cli.Watch(wctx, w.v.key, clientv3.WithRev(rev+1))
	silent := time.NewTimer(silentWatchLimit(s.TTL()))
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-silent.C:
			return errValueSilent
		case wr, ok := <-ch:
			switch {
			case !ok:
				return errValueWatch
			case wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted):
				return fmt.Errorf("%w at revision %d", errValueCompacted, wr.CompactRevision)
			case wr.Err() != nil:
				return wr.Err()
			case wr.Canceled:
				return errValueWatch
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					w.deliver(recipe.Versioned{Rev: ev.Kv.ModRevision})
				} else {
					w.deliver(fromKV(ev.Kv))
				}
			}
		}
	}
}

// deliver gives x to the reader, replacing a value not read yet, unless it
// shows no change (both missing, or the same write) or goes back in Rev.
func (w *valueWatcher) deliver(x recipe.Versioned) {
	if l := w.last; l != nil && (x.Rev < l.Rev || x.Version == l.Version && (x.Version == 0 || x.Rev == l.Rev)) {
		return
	}
	w.last = &x
	select {
	case <-w.out: // not read yet: the newer one replaces it
	default:
	}
	w.out <- x // never blocks: this goroutine is the only sender, and the buffer is empty
}
