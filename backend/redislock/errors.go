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
