package redislock

import (
	"errors"
	"fmt"
)

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

// OpError is a Redis operation of this package that failed: a network error,
// a timeout or an error reply. After a network error or a timeout the
// operation may or may not have been applied by the server; the package
// resolves that itself (see Mutex.Acquire and the lease's Release) before it
// returns an OpError. The underlying error stays reachable with errors.Is
// and errors.As.
type OpError struct {
	Op  string // "connect", "acquire", "release"
	Key string // the lock's key ("" for connect)
	Err error
}

// Error implements error.
func (e *OpError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("redislock: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("redislock: %s %s: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }
