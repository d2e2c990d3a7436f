package etcdlock

import (
	"context"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

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
		if err := w.follower().run(wctx); err != nil {
			s.log.Error("etcdlock: group watch: reading the group failed for good; closing", "group", gr.name, "err", err)
		}
	}) {
		cancel()
		close(out)
	}
	return out
}

// watcher is one Watch: the group's follower's read and apply.
type watcher struct {
	gr   *Group
	out  chan recipe.View
	st   *groupState  // the group as read and followed
	last *recipe.View // the last View delivered
}

// follower returns the loop that reads and follows the group for w.
func (w *watcher) follower() *follower {
	gr := w.gr
	return &follower{
		s: gr.s, log: gr.s.log.With("group", gr.name), prefix: "etcdlock: group watch: ", subject: "the group",
		key: gr.dir, end: clientv3.GetPrefixRangeEnd(gr.dir),
		read: w.read, apply: w.apply,
		expect: func() (int64, int64) { return int64(len(w.st.keys)), w.st.rev },
	}
}

// read reads the group and delivers it, returning the read's revision.
func (w *watcher) read(ctx context.Context) (int64, error) {
	st, err := w.gr.list(ctx)
	if err != nil {
		return 0, err
	}
	w.st = st
	w.deliver(st)
	return st.rev, nil
}

// apply applies a batch of events to the group and delivers it.
func (w *watcher) apply(wr clientv3.WatchResponse) error {
	st := w.st
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
