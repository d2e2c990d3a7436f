package leader_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/recipe/memlock"
)

// scheduler is service code written against recipe.Lock: it runs on
// ZooKeeper (mutex.New), etcd (etcdlock.New), PostgreSQL (pglock.New),
// Redis (redislock.New), or, in a unit test as here, memlock.
func scheduler(ctx context.Context, lock recipe.Lock, work func(context.Context, fence.Token) error) error {
	err := leader.Run(ctx, lock, work)
	if ctx.Err() != nil {
		return nil // stopped by the caller: err is context.Cause(ctx)
	}
	return err // an error retrying cannot cure
}

func ExampleRun() {
	srv, err := memlock.NewServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	s := srv.Connect()
	defer s.Close()
	lock, err := memlock.New(s, "scheduler")
	if err != nil {
		panic(err)
	}

	var guard fence.Guard // at the resource: rejects a former leader's late write
	ctx, stop := context.WithCancel(context.Background())
	terms := 0
	err = scheduler(ctx, lock, func(ctx context.Context, token fence.Token) error {
		if err := guard.Check("schedule", token); err != nil {
			return err
		}
		terms++
		fmt.Println("leading, term", terms)
		if terms == 2 {
			stop() // the service shuts down: fn's context ends with it
			<-ctx.Done()
			fmt.Println("fn:", context.Cause(ctx))
		}
		return nil // gives the lock up; Run acquires it again after a backoff
	})
	fmt.Println("scheduler:", err)
	// Output:
	// leading, term 1
	// leading, term 2
	// fn: context canceled
	// scheduler: <nil>
}
