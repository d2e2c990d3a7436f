module github.com/zkrecipes/zkrecipes/fence/fenceredis

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/zkrecipes/zkrecipes v0.1.0
	github.com/zkrecipes/zkrecipes/backend/redislock v0.1.0
)
