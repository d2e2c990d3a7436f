package mutex

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Holder reads who holds the lock: the first node of its directory (the
// holder by the recipe's rule, whether or not its process has seen it yet).
// ID is the node's data (WithData) when it is printable UTF-8, else its
// session id ("session 0x..."); Token its czxid; Since its ctime, when it
// began to contend. Operations and errors: as Queue.Head.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	h, err := m.q.Head(ctx)
	if err != nil {
		return recipe.HolderState{}, err
	}
	return holderState(h), nil
}

// ObserveHolder delivers Holder's state at once and after every change,
// from Queue.ObserveHead (watches, no polling): coalesced, closed when ctx
// ends or the Session closes, failed reads retried (logged). A holder's
// node keeps the token: it is reported once per node.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	ch, _ := zkside.ObserveHeadAs(ctx, m.q, holderState) // cannot fail: both are set
	return ch
}

// holderState is a queue head as a recipe.HolderState.
func holderState(h zookeeper.Head) recipe.HolderState {
	if !h.Present {
		return recipe.HolderState{}
	}
	n := h.Node
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: holderID(n.Data, n.SessionID), Token: n.Token, Since: n.Created}}
}

// holderID is the published identity of a node with data of session sid:
// the data when it is non-empty printable UTF-8 of at most 256 bytes, else
// "session 0x<sid>" (so binary or hostile data never reaches a terminal).
func holderID(data []byte, sid int64) string {
	if len(data) > 0 && len(data) <= 256 && utf8.Valid(data) && printable(string(data)) {
		return string(data)
	}
	return fmt.Sprintf("session 0x%x", sid)
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
