package recipe

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Holder is a lock's holder (an election's leader) as its server records
// it. ID is public: anyone who may read the lock reads it, so it names a
// process (a host and pid, a pod), never a secret; and anyone who may
// write the lock may write it, so print it quoted (%q), as zkrecipes does.
type Holder struct {
	// ID is the identity the holder published: its backend's WithIdentity
	// (or the election value), else the backend's default, stated by each.
	ID string
	// Token is the fencing token of the holder's grant; zero only where the
	// backend cannot know it (Kubernetes: a client-go elector's grant).
	Token fence.Token
	// Since is when the grant began, as each backend states (ZooKeeper: its
	// node's ctime, maybe before it came first; Kubernetes: acquireTime, by
	// the holder's clock); the zero Time where the backend keeps no clock.
	Since time.Time
}

// HolderState is one state of a lock seen from outside: Held is false when
// nobody holds it, Holder is then the zero value.
type HolderState struct {
	Held   bool
	Holder Holder
}

// String describes s for people: "free", or "held by <id> with token <t>".
func (s HolderState) String() string {
	if !s.Held {
		return "free"
	}
	return fmt.Sprintf("held by %q with token %v", s.Holder.ID, s.Holder.Token)
}

// Equal reports whether s and o are the same state (Since compared with
// time.Time.Equal).
func (s HolderState) Equal(o HolderState) bool {
	return s.Held == o.Held && s.Holder.ID == o.Holder.ID && s.Holder.Token == o.Holder.Token && s.Holder.Since.Equal(o.Holder.Since)
}

// HolderObserver reads who holds a lock without contending for it; each
// backend's exclusive lock implements it (testkit/locktest checks it). It
// reports servers' states only: a holder whose lease has ended in its own
// process is shown until its server lets go.
type HolderObserver interface {
	// Holder reads the lock's state now, in one atomic read of its server.
	// Errors: ctx's cause; ErrSessionClosed; the backend's errors.
	Holder(ctx context.Context) (HolderState, error)
	// ObserveHolder delivers the state at once and after every change (or,
	// where the backend has no change events, every poll it states),
	// coalesced for a slow reader and ending on the latest; consecutive
	// states differ and a non-zero Token never decreases. Failed reads are
	// retried; the channel closes when ctx ends or the Session closes.
	ObserveHolder(ctx context.Context) <-chan HolderState
}

// HoldingMetrics is an optional extension of Metrics: a Metrics that also
// implements it is told of every grant an Acquire or TryAcquire hands out
// (+1 and the grant's backend token, on the contender's goroutine) and of
// its end by Release or loss (-1 and the same token, from the call that
// ends it, possibly under a backend's lock, before a Release returns). An
// operator reads which process holds a lock, and with which token
// (prommetrics: zkrecipes_holding, zkrecipes_holding_token).
type HoldingMetrics interface {
	Holding(kind, dir string, token fence.Token, delta int)
}
