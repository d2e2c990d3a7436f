package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Holder reads who holds the lock: the first node of its directory (the
// holder by the recipe's rule, whether or not its process has seen it yet),
// as zookeeper.Head.State describes it: ID from the node's data (WithData),
// Token its czxid, Since its ctime (when it began to contend). Operations
// and errors: as Queue.Head.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	h, err := m.q.Head(ctx)
	if err != nil {
		return recipe.HolderState{}, err
	}
	return h.State(), nil
}

// ObserveHolder delivers Holder's state at once and after every change,
// from Queue.ObserveHead (watches, no polling): coalesced, closed when ctx
// ends or the Session closes, failed reads retried (logged).
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	ch, _ := zkside.ObserveHeadAs(ctx, m.q, zookeeper.Head.State) // cannot fail: both are set
	return ch
}
