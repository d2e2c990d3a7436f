// Package fenceredis fences data kept in Redis: a write carrying a fencing
// token lower than one already accepted for the same resource is refused
// by Redis itself, in the same Lua script as the write.
//
// Two shapes, each one script:
//
//   - A fence key per resource ([Fence.Do]): the string prefix+resource
//     holds the highest token accepted. Do runs one script: if the stored
//     token is at most the caller's (or there is none), apply the caller's
//     writes and store the caller's token; otherwise answer the stored
//     token and change nothing. The writes land only with the token: a
//     paused holder that resumes with an older token cannot write over a
//     newer holder's data.
//   - A [Register]: one hash holding a value, its token and a version;
//     [Register.Write] is the same script on that key alone.
//
// The caller's writes are [Write] values made by this package's
// constructors ([Set], [SetPX], [Del], [HSet], [HDel], [RPush], [SAdd],
// [SRem]): the script is constant text, the keys travel as KEYS and the
// values as ARGV, so no byte of user data is ever read as Lua, and the
// script allows those commands only. A Redis script is atomic but not
// transactional (a command failing in its middle leaves the earlier ones
// applied), so the script checks everything that could make a write fail
// (the fence key's format, each key's type, and each write's ACL rights,
// see below) before it writes anything, and Do refuses what the script
// does not check (argument counts, TTLs, a key written twice, too many
// arguments for Lua to unpack). The first thing the script writes is the
// token: were a write to fail after it all the same, the writes that
// landed carry the new token (an older holder is still refused), and Do
// returns a *PartialError naming them (fence.ErrUncertain), never
// "nothing applied".
//
// Equal tokens are accepted (the same holder writing again); the zero token
// is refused (fence.ErrNoToken), and so is one above fence.MaxToken. A
// stale token gets a *fence.StaleError (fence.ErrStale) with the highest
// accepted. A script whose answer was lost (the connection broke, ctx
// ended while it was out) returns an error matching fence.ErrUncertain: it
// may have been applied; the same token is accepted again if nothing newer
// landed. So that a lost answer is never sent again behind the fence's
// back (applying the writes twice), the client must not retry: New refuses
// one whose MaxRetries is not -1 (ErrRetries). [Fence.RaiseFloor] and
// [Register.RaiseFloor] raise the mark to a new era's floor
// (fence.Era.Floor) when the lock moves to another backend. [Fence.Admit]
// is the fence.Fence interface: its write adds writes with [AddWrites].
//
// What it protects: the keys written through Do (or Admit's AddWrites) and the
// registers, on one Redis server. What it cannot: keys written by anyone
// without the fence; a fence key or register that someone deletes,
// overwrites or evicts (the mark goes with it: keep the prefix to this
// package, use a maxmemory-policy that does not evict it, such as
// noeviction or volatile-*, and Redis ACLs if other programs share the
// server); a server that loses acknowledged writes (a restart without
// appendfsync always, a failover to a replica that had not received
// them), after which an older token can be accepted again: raise the
// floor to a new era after such a loss; effects outside Redis (give those
// an idempotency key). A Redis Cluster is not supported (the keys of one
// call would have to share a hash slot).
//
// # Errors
//
// [Fence.Do]'s errors: a *fence.StaleError (fence.ErrStale) with the highest
// accepted when token is lower, nothing applied; fence.ErrNoToken for the
// zero token; a *fence.RangeError (fence.ErrTokenOverflow) above
// fence.MaxToken; fence.ErrBadResource (see Key); ErrBadWrite (with the
// write's index); ErrNotFence; ErrWrongType; a *PermissionError
// (recipe.ErrNoPermission) for a right the ACL refuses, nothing applied;
// ctx's error before anything is sent; fence.ErrUncertain when the script
// was sent and its answer lost (it may have been applied: read, or call
// again with the same token), or a *PartialError (token and some writes
// applied); otherwise Redis's refusal, nothing applied.
//
// [Register.Write]'s errors: a *fence.StaleError (fence.ErrStale) with the
// stored token when token is lower, nothing written; fence.ErrNoToken; a
// *fence.RangeError (fence.ErrTokenOverflow) above fence.MaxToken;
// ErrNotFence; ctx's error before anything is sent; fence.ErrUncertain when
// the script was sent and its answer lost (it may have landed); otherwise
// Redis's.
//
// # Access control (Redis ACL)
//
// Redis checks a script's commands against the user's ACL only when the
// script reaches them. So each script first asks Redis
// (redis.acl_check_cmd, Redis 7) whether the user may run every write it
// is about to make, and refuses the whole call if not: a
// *PermissionError (recipe.ErrNoPermission) naming the write, nothing
// applied. The first call of a Fence or Register checks the rights it
// needs on its own keys the same way (EVAL, EVALSHA, TYPE, GET and SET of
// the fence keys; TYPE, HMGET and HSET of a register), before it writes:
// two round trips, until a check succeeds, so keep one Fence for the
// program's life rather than one per call.
// (Redis 6 has no acl_check_cmd: there only EVAL, EVALSHA and the keys'
// patterns are checked in advance, and a write refused in the middle of
// a script gives a *PartialError.) A user with the fence keys and data
// under myapp: needs exactly this ACL line (drop the commands of the
// Writes you do not use; a Register needs +hmget +hset, a Fence +get
// +set):
//
//	ACL SETUSER fencer on >PASSWORD resetkeys ~myapp:* -@all +eval +evalsha +type +get +set +hmget +hset +del +hdel +rpush +sadd +srem
package fenceredis
