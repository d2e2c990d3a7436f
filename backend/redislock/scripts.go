package redislock

import "github.com/redis/go-redis/v9"

// The scripts of the recipe. Each runs atomically on the server and can be
// repeated with the same owner without changing the outcome, which is how a
// request whose answer was lost is resolved: send it again (Acquire,
// renewals) or send the owner-checked delete (cleanup).
//
// Keys: KEYS[1] is the lock key (value: the owner of the grant, with a PX
// expiry, or "next:" and the owner of a waiter it is handed to), KEYS[2]
// the token counter (an integer without expiry, never deleted by the
// package), KEYS[3] the queue: a sorted set of waiting owners, scored in
// arrival order (the last score plus one), with an expiry that every
// waiter's request pushes back.
//
// A waiter is woken on a channel of its own, ARGV chbase followed by its
// owner, which it subscribes to before it enters the queue.

// handoffLua frees the lock at KEYS[1] for the head of the queue KEYS[3]:
// it pops owners in arrival order and PUBLISHes "turn" to each one's
// channel until one has a subscriber, then sets the lock key to "next:"
// and that owner for rttl ms (the reservation, which only that owner's
// acquire turns into a grant) and returns 1. A popped owner without a
// subscriber has gone (crashed, gave up, its connection dropped: it enters
// the queue again at its next check). With nobody left, the key is deleted
// and 0 returned. A PUBLISH the server's ACL refuses is put back, the key
// is deleted all the same (waiters find it free at their fallback
// re-check) and the error is returned as a table {err = ...}.
const handoffLua = `
local function handoff(holder, queue, chbase, rttl)
  while true do
    local head = redis.call('ZPOPMIN', queue)
    if #head == 0 then
      redis.call('DEL', holder)
      return 0
    end
    local n = redis.pcall('PUBLISH', chbase .. head[1], 'turn')
    if type(n) == 'table' then
      redis.call('ZADD', queue, head[2], head[1])
      redis.call('DEL', holder)
      return n
    end
    if n > 0 then
      redis.call('SET', holder, 'next:' .. head[1], 'PX', rttl)
      return 1
    end
  end
end
`

var (
	// acquireScript takes the lock for ARGV[1] for ARGV[2] ms and returns
	// {1, token}; or {0, PTTL of the lock key} if someone else holds it or
	// it is handed to someone else; or {-1, the server's error} if a
	// hand-off it had to do was refused (ACL). The INCR runs only with the
	// SET that took the lock, in the same script, so grant order is token
	// order. Order is FIFO: a free lock goes to the caller only if nobody
	// is queued or the caller is the queue's head; otherwise the script
	// hands it to the head (the lock expired or was left with waiters
	// nobody told) and the caller, if ARGV[3] is "1", joins the queue's
	// tail (once: a queued owner keeps its place). A lock already held by
	// ARGV[1] is an earlier attempt of this very Acquire whose answer was
	// lost: its expiry is set again and its token returned (the counter has
	// not moved since: it moves only with a new grant).
	acquireScript = redis.NewScript(handoffLua + `
local holder, token, queue = KEYS[1], KEYS[2], KEYS[3]
local owner, ttl, chbase = ARGV[1], ARGV[2], ARGV[4]
local function grant()
  redis.call('SET', holder, owner, 'PX', ttl)
  redis.call('ZREM', queue, owner)
  return {1, redis.call('INCR', token)}
end
local v = redis.call('GET', holder)
if v == owner then
  redis.call('PEXPIRE', holder, ttl)
  return {1, tonumber(redis.call('GET', token))}
end
if v == 'next:' .. owner then
  return grant()
end
if not v then
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head or head == owner then
    return grant()
  end
  local r = handoff(holder, queue, chbase, ttl)
  if type(r) == 'table' then
    return {-1, r.err}
  end
  if r == 0 then
    return grant()
  end
end
if ARGV[3] == '1' then
  if not redis.call('ZSCORE', queue, owner) then
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
    redis.call('ZADD', queue, (tonumber(last[2]) or 0) + 1, owner)
  end
  if redis.call('PTTL', queue) < 4 * tonumber(ttl) then
    redis.call('PEXPIRE', queue, 4 * tonumber(ttl))
  end
end
return {0, redis.call('PTTL', holder)}
`)

	// renewScript sets the lock's expiry to ARGV[2] ms if ARGV[1] still
	// holds it and returns 1, else 0 ("not ours": deleted, overwritten, or
	// expired and maybe granted again). It returns -1 and leaves the expiry
	// alone when less than ARGV[3] ms (the TTL minus lossAfter) is left:
	// more than lossAfter has passed since the previous grant or renewal
	// ran, so on the server's clock this renewal runs after its lease's
	// deadline (which counts from the earlier send): a renewal the network
	// held back must not give a lease that has ended another TTL.
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  return -1
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)

	// releaseScript takes ARGV[1] out of the queue (a waiter that leaves)
	// and, if the lock is ARGV[1]'s (held, or handed to it), hands it to
	// the next live waiter (ARGV[3]: the hand-off's reservation time in ms)
	// or deletes it: {1}. {0}: nothing of ARGV[1]'s to free. {2, the
	// server's error}: the key was deleted but the waiters could not be
	// told (the ACL refused the PUBLISH).
	releaseScript = redis.NewScript(handoffLua + `
local v = redis.call('GET', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if v ~= ARGV[1] and v ~= 'next:' .. ARGV[1] then
  return {0}
end
local r = handoff(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if type(r) == 'table' then
  return {2, r.err}
end
return {1}
`)
)
