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
//
// The lock-delay marker (delay.go) is one more key of the lock: "held:"
// and the owner of a grant made with a lock-delay, expiring the delay
// after the lock key (both expiries are set in the same script). Every
// part of the scripts that touches it runs only when the caller's lock has
// the option (a delay argument above 0): a lock without it sends the same
// commands as before the marker existed.

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
	//
	// Lock-delay (ARGV[5] ms above 0; KEYS[4] the marker): a grant writes
	// the marker "held:" owner, expiring ARGV[5] after the lock key. A
	// grant due while a marker lives (its holder ended without a Release)
	// is not made: the lock key becomes "next:" owner for the marker's
	// PTTL plus ARGV[2] (nobody else can take it) and {2, the marker's
	// PTTL} is returned, the rest of the delay on the server's clock, which
	// the caller waits out before it asks again; a TryAcquire (ARGV[6]
	// "0") gets {0, the marker's PTTL} and changes nothing. A marker
	// without an expiry or longer than ARGV[2] + ARGV[5] (not written by
	// this package) is cut to that.
	acquireScript = redis.NewScript(handoffLua + `
local holder, token, queue, marker = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, ttl, chbase = ARGV[1], ARGV[2], ARGV[4]
local delay, waits = tonumber(ARGV[5]), ARGV[6] == '1'
local function delayLeft()
  if delay == 0 then
    return 0
  end
  local left, cap = redis.call('PTTL', marker), tonumber(ttl) + delay
  if left == -1 or left > cap then
    redis.call('PEXPIRE', marker, cap)
    left = cap
  end
  return math.max(left, 0)
end
local function grant()
  local left = delayLeft()
  if left > 0 then
    if not waits then
      return {0, left}
    end
    redis.call('SET', holder, 'next:' .. owner, 'PX', left + tonumber(ttl))
    redis.call('ZREM', queue, owner)
    return {2, left}
  end
  redis.call('SET', holder, owner, 'PX', ttl)
  redis.call('ZREM', queue, owner)
  if delay > 0 then
    redis.call('SET', marker, 'held:' .. owner, 'PX', tonumber(ttl) + delay)
  end
  return {1, redis.call('INCR', token)}
end
local v = redis.call('GET', holder)
if v == owner then
  redis.call('PEXPIRE', holder, ttl)
  if delay > 0 then
    redis.call('SET', marker, 'held:' .. owner, 'PX', tonumber(ttl) + delay)
  end
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
	// held back must not give a lease that has ended another TTL. With a
	// lock-delay (ARGV[4] ms above 0), an extension also sets the marker
	// KEYS[2] to "held:" ARGV[1] expiring ARGV[4] ms from now (written
	// again, not only extended: a marker someone deleted comes back).
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  return -1
end
local r = redis.call('PEXPIRE', KEYS[1], ARGV[2])
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[2], 'held:' .. ARGV[1], 'PX', ARGV[4])
end
return r
`)

	// releaseScript takes ARGV[1] out of the queue (a waiter that leaves)
	// and, if the lock is ARGV[1]'s (held, or handed to it), hands it to
	// the next live waiter (ARGV[3]: the hand-off's reservation time in ms)
	// or deletes it: {1}. {0}: nothing of ARGV[1]'s to free. {2, the
	// server's error}: the key was deleted but the waiters could not be
	// told (the ACL refused the PUBLISH).
	//
	// Lock-delay: when ARGV[1] held the lock (not a hand-off to it) and
	// the marker KEYS[3] names it, ARGV[4] says how the grant ended:
	// "clean" deletes the marker (no delay for the next holder), a number
	// of ms (above 0) makes the marker expire that long from now (the delay
	// runs from this delete), "0" (a lock without the option) leaves it.
	releaseScript = redis.NewScript(handoffLua + `
local v = redis.call('GET', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if v ~= ARGV[1] and v ~= 'next:' .. ARGV[1] then
  return {0}
end
if v == ARGV[1] and ARGV[4] ~= '0' and redis.call('GET', KEYS[3]) == 'held:' .. ARGV[1] then
  if ARGV[4] == 'clean' then
    redis.call('DEL', KEYS[3])
  else
    redis.call('PEXPIRE', KEYS[3], ARGV[4])
  end
end
local r = handoff(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if type(r) == 'table' then
  return {2, r.err}
end
return {1}
`)
)
