// Package value is a shared value on ZooKeeper (Curator's SharedValue and
// SharedCount, kazoo's Counter): one persistent znode whose data many
// processes read, watch and write with compare-and-set. It implements
// recipe.Value (testkit/valuetest checks it); package counter is a counter
// over it.
//
// # Recipe
//
// The value is the data of one persistent znode (zookeeper.ValueNode).
// Its Version is the node's data version plus 1, so that 0 stays
// "absent"; its Rev is the node's mzxid, and for a missing node a zxid at
// which it was missing (the pzxid of its parent, read with the parent's
// children in one reply: no child was created or deleted since). A later
// state has a larger Rev, also across a delete and a new create, after
// which Version starts again at 1.
//
// Get syncs, then reads. TrySet with version 0 creates the node (and its
// missing parents, as containers, as every recipe makes its directory)
// only if it does not exist; with a version v > 0 it is a setData with
// data version v-1. Either fails with recipe.ErrConflict, writing nothing,
// when the node is not as expected. A write whose reply was lost (the
// connection dropped after the send) is settled by reading the node again
// before anything is sent again: at the version the write makes with the
// write's bytes, it was applied; unchanged, it is sent again; at that
// version with other bytes, it conflicts (applied, it would have made that
// version first); past it, or deleted, it may have applied and been
// overwritten: TrySet returns an *recipe.OpError saying it is unconfirmed,
// never recipe.ErrConflict, which promises nothing was written. Another
// writer's write of the very same bytes over the very
// same version cannot be told from this one, and is taken for it: the node
// holds what this write would have made (a writer that must know whose
// write it was makes its bytes unique, as package counter does with a
// random tag in every write).
//
// Watch follows the node with one-shot watches, shared by all the
// Session's watchers of the node: a data watch while it exists, an exists
// watch while it is missing, each set before the read it follows, set
// again by go-zookeeper after a reconnection and fired by a lost session
// (the node is then read again). Delivery is coalesced and never goes
// back in Rev.
//
// Data is bounded by the Session's packet limit (zookeeper.WithMaxPacket,
// default 1 MiB less a byte, for the whole request): more fails with
// recipe.ErrTooLarge before anything is sent. A value is read whole: keep
// it small (ZooKeeper is not a blob store). Reading a missing value lists
// its parent (for its Rev): keep a value's parent a small directory, not
// one of thousands of children.
package value
