package redislock

import "github.com/redis/go-redis/v9"

// The three scripts of the recipe. Each runs atomically on the server and can
// be repeated with the same owner without changing the outcome, which is how
// a request whose answer was lost is resolved: send it again (Acquire,
// renewals) or send the owner-checked delete (cleanup).
//
// Keys: KEYS[1] is the lock key (value: the owner of the grant, with a PX
// expiry), KEYS[2] the token counter (an integer without expiry, never
// deleted by the package).
var (
	// acquireScript takes the lock for ARGV[1] for ARGV[2] ms and returns
	// {1, token}, or {0, PTTL of the holder's key} if someone else holds it.
	// The INCR runs only when the SET took the lock, in the same script, so
	// grant order is token order. A lock already held by ARGV[1] is an
	// earlier attempt of this very Acquire whose answer was lost: its expiry
	// is set again and its token returned (the counter has not moved since:
	// it moves only with a new grant, and the lock was never free).
	acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]))}
end
return {0, redis.call('PTTL', KEYS[1])}
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

	// releaseScript deletes the lock if ARGV[1] holds it, tells the waiters
	// on channel ARGV[2], and returns 1; else 0 (nothing of ours to delete).
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
`)
)
