// Package latch provides a leader latch on ZooKeeper: Curator's LeaderLatch
// semantics, with fencing tokens. A participant joins an election under a
// directory and stays in it until Close, leading while its znode is the
// first (the ZooKeeper recipes page's "Leader Election"). Unlike an
// election's candidate, it keeps its node across a suspension: reconnected
// in the same session, it leads again with the same node and token; after a
// lost session it joins again, behind everyone, with a larger token.
//
//	l, err := latch.New(s, "/election/report-writer", "host-1")
//	defer l.Close(context.Background()) // final: leaves no node
//	err = l.Start(ctx)
//	lease, err := l.Await(ctx) // leading until lease.Context() ends
//
// Every grant is a recipe.Lease whose Token is the winning node's czxid,
// larger than every earlier leader's, and whose Context ends with the
// leadership (context.Cause: recipe.ErrSuspended, ErrSessionLost,
// ErrNodeDeleted, ErrReleased at Close, ErrSessionClosed). A leader that
// pauses can resume after it ended: guard the resource with the token
// (package fence). What happens on each fault:
// docs/recipes.md#leader-latch-latchnew; permissions: as package mutex.
package latch
