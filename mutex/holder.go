package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipe"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Holder reads who holds the lock: the first node of its directory (the
// holder by the recipe's rule, whether or not its process has seen it yet;
// with WithLockDelay, once it served the delay), as zookeeper.Head.State
// describes it: ID from the node's data (WithData), Token its czxid, Since
// its ctime (when it began to contend). Operations and errors: Queue.Holder.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	h, err := m.q.Holder(ctx)
	if err != nil {
		return recipe.HolderState{}, err
	}
	return h.State(), nil
}

// ObserveHolder delivers Holder's state at once and after every change,
// from Queue.ObserveHolder (watches, no polling): coalesced, closed when ctx
// ends or the Session closes, failed reads retried (logged). An observer
// of a lock whose holders use WithLockDelay needs the option too.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	return m.q.ObserveHolder(ctx)
}
