package election

import (
	"context"
	"github.com/zkrecipes/zkrecipes/recipe"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Observe reports the election's state: the current one at once, then every
// change of leader and every change to "no leader" (C16), coalesced for a
// slow reader but always ending on the latest state; consecutive values
// differ. It reports znodes, not leases: a suspended leader stays until its
// znode goes. It is zookeeper.Queue.ObserveHead's loop: a failing read is
// retried (logged at warning level), the last state staying current; the
// channel closes when ctx ends, the Session closes, or on an error retrying
// cannot cure (recipe.Permanent, recipe.ErrMixedRecipes met twice a second
// apart; logged once). A reader that stops must end ctx.
func (e *Election) Observe(ctx context.Context) <-chan Observation {
	ch, _ := zkside.ObserveHeadAs(ctx, e.q, observation) // cannot fail: both are set
	return ch
}

func observation(h zookeeper.Head) Observation {
	if !h.Present {
		return Observation{}
	}
	return Observation{Present: true, Leader: leaderOf(h.Node)}
}

var _ recipe.HolderObserver = (*Election)(nil)

// Holder reads who leads, as Leader does, as a recipe.HolderState: ID is
// the leader's value (printable, else its session), Token its czxid, Since
// its node's ctime. Errors: as Leader, without ErrNoLeader (Held is false).
func (e *Election) Holder(ctx context.Context) (recipe.HolderState, error) {
	h, err := e.q.Head(ctx)
	if err != nil {
		return recipe.HolderState{}, err
	}
	return h.State(), nil
}

// ObserveHolder is Observe as recipe.HolderStates, for tools that follow
// any backend's holder (zkrecipes elect --observe).
func (e *Election) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	return e.q.ObserveHolder(ctx)
}
