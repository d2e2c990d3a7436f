package redislock

import "errors"

var (
	// ErrBadURL is matched by Connect's error for a URL it can't use: not
	// redis:// or rediss://, no host, several hosts, or a part go-redis
	// rejects (see redis.ParseURL). Nothing is dialled then.
	ErrBadURL = errors.New("redislock: bad Redis URL")

	// ErrNotPrimary is matched by the error of Connect and NewSession when
	// the server is a replica. A replica refuses the lock's writes (or, if
	// writable, keeps them to itself and loses them on the next sync): locks
	// live on one primary, see the package documentation.
	ErrNotPrimary = errors.New("redislock: the Redis server is a replica")
)

// ErrBadData is matched by the error of Mutex.Holder when a lock's keys
// hold what this package never writes: a lock key that is not an owner id
// (or "next:" and one), a held lock whose token counter is missing or not
// a positive integer, a key of another type; and, logged by ObserveHolder,
// a token counter that went back (reset by FLUSHALL, eviction or another
// client). Another client of the server wrote it: the error describes the
// fault without quoting the value.
var ErrBadData = errors.New("redislock: a lock's keys hold data this package does not write")
