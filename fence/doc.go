// Package fence provides fencing tokens and the resource-side check that
// makes a lease-based lock safe. A holder can pause (GC, swap, a frozen VM)
// past its lease, lose the lock, and resume believing it holds it: only the
// resource can reject its late write. Every grant of a zkrecipes lock
// carries a Token larger than every earlier grant's; the resource keeps the
// highest token it accepted and refuses anything lower.
//
//	var guard fence.Guard // at the resource
//	err := guard.Do("account", lease.Token(), func() error { return save(balance) })
//	// errors.Is(err, fence.ErrStale): a later holder has written; stop
//
// [Guard] is that check in process; resource/fencesql (database/sql) and
// resource/fencezk (a znode) make it atomically with the write at those
// resources (docs/fencing.md). [Fence] is what all of them implement, so that
// resource/fencehttp can check tokens at an HTTP service through any of them.
// This package imports neither ZooKeeper nor SQL.
//
// # The Fence contract
//
// [Fence.Admit] runs write if t is not lower than the highest token
// accepted for resource, and records t as the highest when write returns
// nil; check, write and record are one atomic step for what write does
// through the fence. Each implementation says what that covers: a Guard,
// the process's memory; fencesql, the transaction write finds in its ctx;
// fencezk, the operations write adds. An equal token is accepted. write
// may be nil: Admit then only records t. Admit calls write at most once (a
// retry of the implementation's own comes before write or applies nothing
// of it again). write's ctx is derived from ctx and may carry the
// implementation's handle.
//
// Errors, after which t is not recorded and nothing write did through
// the fence took effect, unless the error matches [ErrUncertain]:
//   - a [*StaleError] (ErrStale) with the highest accepted token when
//     t is lower: write is not called (an implementation that checks
//     again when it applies write's effects may find t stale after
//     write ran; those effects are then dropped);
//   - [ErrNoToken] for the zero token, a [*RangeError]
//     (ErrTokenOverflow) for one above MaxToken, an error matching
//     [ErrBadResource] for a name the fence cannot keep, before
//     anything is sent;
//   - write's error (possibly wrapped), or ctx's;
//   - an error matching [ErrUncertain] when the resource's answer was
//     lost: t and write's effects may have been applied;
//   - otherwise the resource's own error.
//
// write must not call Admit on the same resource (it may deadlock).
//
// # Eras
//
// An [Era] numbers one period of a lock's life on one backend: every switch
// of lock service (ZooKeeper to PostgreSQL, say), and every event that can
// make a backend's tokens go back (a restored snapshot, a lost Redis
// counter), starts the next one. Era g owns the token range
// [g·2^48, (g+1)·2^48): a grant whose backend gave it the raw token r
// carries g.Floor()+r (recipe.InEra does it), so the tokens of a later era
// are larger than every token an earlier one can ever produce, whatever the
// backends, and raising a fence to the new era's Floor ([Guard.RaiseFloor],
// and each fence's RaiseFloor) refuses every older holder at once
// (docs/backends.md#switching-backends, docs/backends.md#switching-backends).
// A floor above [MaxFloor] (the last era's floor) is refused with a
// [*RangeError] (matching [ErrTokenOverflow]) by every fence ([CheckFloor]):
// no era's grants would all pass it.
//
// Tokens of a lock that is not wrapped are era 0 as long as they
// stay below 2^48 (ZooKeeper: while its epoch is below 65536).
package fence
