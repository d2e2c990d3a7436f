package memlock

import (
	"context"
	"time"

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
	ch := make(chan recipe.HolderState, 1)
	gctx, cancel := m.s.g.Bind(ctx)
	if !m.s.g.Go(func() { defer close(ch); defer cancel(); m.observe(gctx, ch) }) {
		cancel()
		close(ch)
	}
	return ch
}

// observe is ObserveHolder's loop: read, deliver if changed, wait.
func (m *Mutex) observe(ctx context.Context, ch chan recipe.HolderState) {
	var c coalescer
	for ctx.Err() == nil {
		var st recipe.HolderState
		var changed <-chan struct{}
		_, err := m.s.call(func(int64) error { st, changed = m.s.srv.holder(m.name); return nil })
		if err != nil && m.s.g.Closed() {
			return
		}
		if err == nil {
			c.offer(ch, st)
		}
		select {
		case <-changed: // nil after an error: the poll below
		case <-time.After(pollInterval):
		case <-ctx.Done():
		}
	}
}

// coalescer delivers states on a channel of one slot, a state still
// pending there replaced by the next: the reader ends on the latest, never
// gets one twice in a row, and never one whose token is below a held
// state's it was offered before.
type coalescer struct {
	started bool
	had     recipe.HolderState // what the reader has (or had) before the pending state
	last    recipe.HolderState // the newest state offered and kept
}

func (c *coalescer) offer(ch chan recipe.HolderState, st recipe.HolderState) {
	if c.started && (st == c.last || st.Held && c.last.Held && st.Holder.Token < c.last.Holder.Token) {
		return
	}
	select {
	case <-ch: // the pending state, replaced: the reader has c.had
	default:
		c.had = c.last
	}
	c.last = st
	if c.started && st == c.had {
		return // the reader has it already
	}
	c.started = true
	ch <- st
}
