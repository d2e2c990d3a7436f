package election

import (
	"context"

	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Observe reports the state of the election (etcd's Observe, which reports
// leaders only, never the gaps): the current state at once,
// then every change of leader and every change to "no leader" (an empty or
// missing directory: case C16). Delivery coalesces: a reader that falls
// behind skips intermediate states, but the latest state is always
// delivered, and the first value it reads after falling behind is the
// latest state known at that moment. Consecutive observations always differ
// (a different leader node, or a change between leader and no leader).
//
// The channel is closed when ctx ends or the Session is closed, and on an
// error that retrying cannot cure (logged once at error level): another
// recipe's nodes in the directory (recipe.ErrMixedRecipes, met by two reads
// in a row a second apart), an ACL refusal. So a channel closed while ctx
// is live and the Session open means such an error, as etcd's Observe
// closes its channel when it cannot go on. Nothing is delivered after the
// close. A reader that stops reading must end ctx, or the observer's
// goroutines and its watch registration stay until then.
//
// Observe reports znodes, not leases: a leader whose connection is SUSPENDED
// has already given leadership up (its lease ended) but is reported until
// its znode goes (at its session's expiry, or when it reconnects and the
// node is deleted). Fence effects with the token (package fence).
//
// It is zookeeper.ObserveHeadAs (one goroutine, never blocking the client's
// event delivery; ZooKeeper operations per change: getChildren and getData
// of the first node, and one watch shared with the Session's other waiters).
// Other failing reads are retried (and logged at warning level); the last
// delivered state stays current meanwhile.
func (e *Election) Observe(ctx context.Context) <-chan Observation {
	ch, _ := zookeeper.ObserveHeadAs(ctx, e.q, observation) // cannot fail: both are set
	return ch
}

func observation(h zookeeper.Head) Observation {
	if !h.Present {
		return Observation{}
	}
	return Observation{Present: true, Leader: leaderOf(h.Node)}
}
