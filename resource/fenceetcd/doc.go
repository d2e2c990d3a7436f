// Package fenceetcd fences data kept in etcd: a write carrying a fencing
// token lower than one already accepted for the same resource is refused
// by etcd itself, in the same transaction as the write.
//
// Two shapes, each one etcd transaction:
//
//   - A fence key per resource ([Fence.Do]): the key prefix+resource
//     holds the highest token accepted (19 zero-padded decimal digits, so
//     that etcd's byte-wise value comparison is the numeric one). Do sends
//     one transaction: if the stored token is at most the caller's (or
//     there is none), put the caller's token and apply the caller's
//     operations (puts, deletes, gets); otherwise read the stored token
//     and change nothing. The caller's operations land only with the
//     token: a paused holder that resumes with an older token cannot
//     write over a newer holder's data. (etcd's value comparison fails on
//     a missing key, so a resource's first Do creates its fence key with
//     the zero token first, in a transaction of its own.)
//   - A [Register]: one key holding a value and its token; [Register.Write]
//     is the same transaction on that key alone.
//
// Equal tokens are accepted (the same holder writing again); the zero token
// is refused (fence.ErrNoToken), and so is one above fence.MaxToken. A
// stale token gets a *fence.StaleError (fence.ErrStale) with the highest
// accepted. A transaction whose answer was lost (the connection broke, ctx
// ended while it was out, the leader changed) returns an error matching
// fence.ErrUncertain: it may have been applied; the same token is accepted
// again if nothing newer landed. [Fence.RaiseFloor] and
// [Register.RaiseFloor] raise the mark to a new era's floor
// (fence.Era.Floor) when the lock moves to another backend.
// [Fence.Admit] is the fence.Fence interface: its write adds operations
// with [AddOps].
//
// What it protects: the keys written through Do (or Admit's AddOps) and the
// registers. What it cannot: keys written by anyone without the fence
// (etcd has no per-key check of who writes); a fence key or register that
// someone deletes or overwrites (the mark goes with it: keep the prefix to
// this package, and protect it with etcd's roles if other programs share
// the cluster); effects outside etcd (give those an idempotency key).
// Reads in Do see the state it writes over, but nothing keeps other
// writers from changing those keys afterwards unless they too go through
// the fence.
//
// # Errors
//
// [Fence.Do]'s transaction: etcd limits a transaction's size
// (--max-request-bytes, 1.5 MiB by default) and its operations
// (--max-txn-ops, 128 by default: the fence's put and at most 127 ops);
// it refuses more, certainly, nothing applied. The gets among its ops read
// the state the transaction writes over.
//
// Do's errors: a *fence.StaleError (fence.ErrStale) with the highest
// accepted when token is lower, nothing applied; fence.ErrNoToken for the
// zero token; a *fence.RangeError (fence.ErrTokenOverflow) above
// fence.MaxToken; fence.ErrBadResource (see Key); ErrBadOp (with the op's
// index); ErrNotFence (when the key's value, not in this package's format,
// sorts above the token's: one that sorts below is overwritten); ctx's
// error before anything is sent; fence.ErrUncertain wrapping the client's
// error when the transaction was sent and its answer lost (it may have
// been applied: read, or call again with the same token); otherwise etcd's
// refusal (e.g. a duplicate key in ops), nothing applied.
//
// [Register.Write]'s errors: a *fence.StaleError (fence.ErrStale) with the
// stored token when token is lower, nothing written; fence.ErrNoToken; a *fence.RangeError
// (fence.ErrTokenOverflow) above fence.MaxToken; ErrNotFence when the
// key holds a value in another format that sorts above the token's (one
// that sorts below is overwritten, and prev is zero); ctx's error
// before anything is sent; fence.ErrUncertain when the write was sent and
// its answer lost (it may have landed); otherwise etcd's.
package fenceetcd
