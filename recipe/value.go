package recipe

import "context"

// Shared values (Curator's SharedValue and SharedCount, kazoo's Counter):
// one value stored on the server, read and written by many processes with
// compare-and-set. Implemented by package value (ZooKeeper) and
// etcdlock.NewValue; package counter is a counter over any Value.

// Versioned is a shared value's content at one version.
type Versioned struct {
	// Data is the value; nil when it does not exist. Callers must not
	// modify it.
	Data []byte
	// Version is 0 when the value does not exist, else its version: a
	// later write has a larger one (ZooKeeper: the node's data version
	// plus 1, so that 0 stays "absent"; etcd: the key's mod revision).
	Version int64
	// Rev is a point of the server's order at which the value held (a
	// ZooKeeper zxid, an etcd revision): a later state has a larger Rev,
	// also across a delete, after which Version starts again.
	Rev int64
}

// Value is one shared value. Its methods are safe for concurrent use.
type Value interface {
	// Get reads the value from the server, at least as new as any write
	// completed before the call (ZooKeeper syncs first; etcd reads with
	// quorum). A nil ctx, here and in TrySet, is recipe.ErrBadOption.
	Get(ctx context.Context) (Versioned, error)
	// TrySet writes data if the value's version is still expected (0: only
	// if it does not exist), and returns the value written. ErrConflict
	// when the version differs: nothing is written. A write whose reply was
	// lost is settled by reading the value again, not guessed; if others
	// wrote it since, whether it applied is unknown, and the error (an
	// *OpError, never ErrConflict) says so. Errors also:
	// ErrTooLarge for data the backend cannot carry; ctx's cause; the
	// backend's.
	TrySet(ctx context.Context, expected int64, data []byte) (Versioned, error)
	// Watch delivers the value now and after each change, coalesced (a
	// slow reader skips versions but gets the latest), never one with a
	// Rev below the last delivered (a deleted value is delivered with
	// Version 0). The channel closes when
	// ctx ends (a nil ctx never ends), the Session closes, or reading fails
	// for good (logged).
	Watch(ctx context.Context) <-chan Versioned
}
