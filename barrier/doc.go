// Package barrier holds barriers on ZooKeeper: a Barrier that blocks its
// waiters while it is set (Curator's DistributedBarrier), and a
// DoubleBarrier whose participants start a computation together once n
// have entered, and finish it together once all have left (Curator's
// DistributedDoubleBarrier; the "Barriers" and "Double Barriers" of the
// ZooKeeper recipes page). Neither reports a state the server never had.
//
//	b, err := barrier.New(s, "/deploy/freeze")
//	err = b.Set(ctx)    // waiters block from now on
//	err = b.Wait(ctx)   // elsewhere: returns once Remove ran
//
//	d, err := barrier.NewDouble(s, "/jobs/42/barrier", 3)
//	err = d.Enter(ctx)  // returns once 3 participants are in
//	compute()
//	err = d.Leave(ctx)  // returns once all 3 are out
//
// # Barrier
//
// The barrier is one persistent znode (zookeeper.ValueNode): Set creates
// it (missing parents as containers) unless it exists, Remove deletes it,
// both idempotent and settled by reading after a lost reply. Wait returns
// once the node does not exist, following it with the Session's shared
// one-shot watch (one server watch per path however many waits are
// cancelled), across session losses. A barrier stays set until someone
// removes it: its setter's crash does not remove it.
//
// # Double barrier
//
// Each participant is an ephemeral sequential znode of a Queue (package
// zookeeper) in the directory, protected name "_c_<guid>-barrier-<seq>",
// data "n mark\n" then WithData's: the engine's create, so a lost reply
// never leaves a second node, and a failed or cancelled Enter leaves none.
// A participant has entered when a snapshot of the directory (the server's
// state at one point) holds n nodes, or when a node carries a mark that
// covers its own: the Rev of such a snapshot at or after its node's create
// (so it was one of those n). It then marks its own node with that Rev.
// Leave deletes the node only once every node of its round (made no later
// than its mark) is marked, so a slow participant never misses the count
// because fast ones left (the proof is in wait.go), then waits for the
// nodes it saw entered to go. Only ephemeral nodes count; a mark later
// than the directory's state is ignored as forged. Every participant must use the same n: one
// whose n differs from that of the oldest participant not entered yet gets
// ErrCountMismatch. Each participant watches the directory and
// every node in it: every change wakes every participant, fine for tens or
// hundreds of participants, not thousands.
//
// A directory may serve one round after another, so participants may loop
// Enter, work, Leave on it: a round's marks never cover a node created
// after them, and a Leave waits only for the participants that entered,
// not for one already waiting for the next round. A participant that
// joins while a round is leaving may still see n nodes and enter with it
// (that round's Leave then waits for it). Where rounds must not mix, give
// each a directory ("/jobs/42/barrier"). The directory is a container,
// removed by the server once empty.
//
// # When a participant fails: the numbers
//
// A participant cut off from ZooKeeper keeps waiting while SUSPENDED (its
// node keeps its place); its Enter or Leave fails with
// recipe.ErrSessionLost once its Session presumes the session lost, at the
// latest one session timeout T after the send of its newest answered
// request (10 s by default, zookeeper.WithSessionTimeout). The server
// deletes its node only when the session expires, T after the last
// request it received: so it knows before the others can see it gone. A
// crashed participant still counts toward n, and holds the others'
// Leave, for T.
package barrier
