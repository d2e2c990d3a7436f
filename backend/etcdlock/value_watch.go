package etcdlock

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Watch delivers the value now and after each change (recipe.Value.Watch):
// a linearizable read of the key, then a watch from the next revision
// whose events it delivers (a delete as Version 0, its Rev the delete's
// revision). Coalesced (a value not taken yet is replaced by a newer one),
// never going back in Rev, no value without a change. A compacted
// revision and a failed or cancelled watch are recovered by reading again;
// a watch silent for a TTL is checked by one small read (the key's count
// and mod revision), and read again if it missed a change. The channel
// closes when ctx ends (a nil ctx never ends), the Session closes, or
// reading fails for good (logged).
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
		if err := w.follower().run(wctx); err != nil {
			s.log.Error("etcdlock: value watch: reading the value failed for good; closing", "value", v.name, "err", err)
		}
	}) {
		cancel()
		close(out)
	}
	return out
}

// valueWatcher is one Watch: the value's follower's read and apply.
type valueWatcher struct {
	v    *Value
	out  chan recipe.Versioned
	held bool              // whether the key exists, as read and followed
	rev  int64             // the revision up to which the key was followed
	last *recipe.Versioned // the last value delivered
}

// follower returns the loop that reads and follows the value for w.
func (w *valueWatcher) follower() *follower {
	v := w.v
	return &follower{
		s: v.s, log: v.s.log.With("value", v.name), prefix: "etcdlock: value watch: ", subject: "the value",
		key: v.key, read: w.read, apply: w.apply, expect: w.expect,
	}
}

// read reads the key (linearizable) and delivers its value, returning the
// read's revision.
func (w *valueWatcher) read(ctx context.Context) (int64, error) {
	resp, err := w.v.get(ctx)
	if err != nil {
		return 0, err
	}
	w.held, w.rev = len(resp.Kvs) > 0, resp.Header.Revision
	w.deliver(fromGet(resp))
	return w.rev, nil
}

// apply delivers each event of a watch response: a delete as Version 0,
// its Rev the delete's revision.
func (w *valueWatcher) apply(wr clientv3.WatchResponse) error {
	for _, ev := range wr.Events {
		w.held, w.rev = ev.Type != clientv3.EventTypeDelete, ev.Kv.ModRevision
		if w.held {
			w.deliver(fromKV(ev.Kv))
		} else {
			w.deliver(recipe.Versioned{Rev: ev.Kv.ModRevision})
		}
	}
	return nil
}

// expect returns how many keys the key's range holds as followed (1 if
// the key exists, else 0) and the revision it was followed up to.
func (w *valueWatcher) expect() (keys, rev int64) {
	if w.held {
		return 1, w.rev
	}
	return 0, w.rev
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
