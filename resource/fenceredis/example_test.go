package fenceredis_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
)

// A holder keeps its output in Redis, written in one script with its
// lease's token; a paused holder with an older token is refused and its
// write never lands.
func ExampleFence_Do() {
	ctx := context.Background()
	url := redistest.ExampleURL() // e.g. "redis://redis.internal:6379/0"
	s, err := redislock.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, _ := redislock.New(s, "locks/report")
	first, err := m.Acquire(ctx) // a holder that will pause past its lease
	if err != nil {
		fmt.Println(err)
		return
	}
	old := first.Token()
	first.Release(ctx)           // (here: released, to keep the example short)
	lease, err := m.Acquire(ctx) // the next holder
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	opts, _ := redis.ParseURL(url)
	opts.MaxRetries = -1 // a lost answer must not be sent again behind the fence's back
	cli := redis.NewClient(opts)
	defer cli.Close()
	defer cli.Del(context.Background(), "app:fence:report", "app:report") // the example leaves no key

	f, _ := fenceredis.New(cli, "app:fence:")
	_, err = f.Do(ctx, "report", lease.Token(), fenceredis.Set("app:report", "totals: 42"))
	fmt.Println("write:", err)
	_, err = f.Do(ctx, "report", old, fenceredis.Set("app:report", "late write of the first holder"))
	fmt.Println("older token refused:", errors.Is(err, fence.ErrStale))
	fmt.Println(cli.Get(ctx, "app:report").Val())
	// Output:
	// write: <nil>
	// older token refused: true
	// totals: 42
}
