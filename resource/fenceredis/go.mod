module github.com/zkrecipes/zkrecipes/resource/fenceredis

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/zkrecipes/zkrecipes v0.1.0
	github.com/zkrecipes/zkrecipes/backend/redislock v0.1.0
)

require github.com/zkrecipes/zkrecipes/resource/fencesql v0.1.0 // indirect

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	github.com/zkrecipes/zkrecipes/testkit/nemesis v0.1.0
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
