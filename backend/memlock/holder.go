package memlock

import (
	"context"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Holder reads who holds the lock in one request: its granted first entry,
// with ID "memlock session <n>" (memlock has no identities), its token, and
// the Server's time of the grant as Since. Errors: ctx's cause;
// recipe.ErrSessionClosed; ErrUnreachable while the Session is cut off.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	if ctx.Err() != nil {
		return recipe.HolderState{}, context.Cause(ctx)
	}
	var st recipe.HolderState
	_, err := m.s.call(func(int64) error { st, _ = m.s.srv.holder(m.name); return nil })
	return st, err
}

// ObserveHolder delivers Holder's state at once and after every change of
// the lock's queue (or, while unreachable, every poll interval), coalesced
// for a slow reader; consecutive states differ and the token never goes
// back. The channel closes when ctx ends or the Session closes.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	out := notify.NewLatest(recipe.HolderState.Equal)
	gctx, cancel := m.s.g.Bind(ctx)
	if !m.s.g.Go(func() { defer out.Close(); defer cancel(); m.observe(gctx, out) }) {
		cancel()
		out.Close()
	}
	return out.C()
}

// observe is ObserveHolder's loop: read, deliver if changed, wait.
func (m *Mutex) observe(ctx context.Context, out *notify.Latest[recipe.HolderState]) {
	var top fence.Token // the largest token delivered
	for ctx.Err() == nil {
		var st recipe.HolderState
		var changed <-chan struct{}
		_, err := m.s.call(func(int64) error { st, changed = m.s.srv.holder(m.name); return nil })
		if err != nil && m.s.g.Closed() {
			return
		}
		if err == nil && !(st.Held && st.Holder.Token < top) {
			out.Offer(st)
			top = max(top, st.Holder.Token)
		}
		select {
		case <-changed: // nil after an error: the poll below
		case <-time.After(pollInterval):
		case <-ctx.Done():
		}
	}
}
