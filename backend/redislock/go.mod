module github.com/zkrecipes/zkrecipes/backend/redislock

go 1.26.0

replace github.com/zkrecipes/zkrecipes => ../..

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/zkrecipes/zkrecipes v0.0.0-00010101000000-000000000000
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
