package leader_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
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
	ticks := 0
	err = scheduler(ctx, lock, func(ctx context.Context, token fence.Token) error {
		// The contract: run while leading, return when ctx ends.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				fmt.Println("fn:", context.Cause(ctx))
				return nil
			case <-tick.C:
				if err := guard.Check("schedule", token); err != nil {
					return err
				}
				if ticks++; ticks == 3 {
					fmt.Println("scheduled 3 rounds")
					stop() // the service shuts down: fn's context ends with it
				}
			}
		}
	})
	fmt.Println("scheduler:", err)
	// Output:
	// scheduled 3 rounds
	// fn: context canceled
	// scheduler: <nil>
}

// A job done once under the lock, not a standing loop: with Stop, Run ends
// when fn returns while leading (Curator's LeaderSelector without
// autoRequeue). Without it Run would campaign again after
// DefaultRequeuePause and run the job again.
func ExampleStop() {
	srv, err := memlock.NewServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	s := srv.Connect()
	defer s.Close()
	lock, err := memlock.New(s, "migrate")
	if err != nil {
		panic(err)
	}

	err = leader.Run(context.Background(), lock, func(ctx context.Context, token fence.Token) error {
		fmt.Println("migrating under the lock")
		return nil // or the job's error: Run returns it
	}, leader.WithOnReturn(leader.Stop()))
	fmt.Println("Run:", err)
	// Output:
	// migrating under the lock
	// Run: <nil>
}

// A liveness probe for a leader-gated service: /healthz fails while a
// leader function runs on more than the tolerance after its lease ended
// (a leader that does not stop), so that the platform restarts it.
func ExampleHealth() {
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
	health, err := leader.NewHealth(10 * time.Second)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health) // the liveness probe's URL

	ctx, stop := context.WithCancel(context.Background())
	err = leader.Run(ctx, lock, func(ctx context.Context, token fence.Token) error {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		fmt.Print("leading, probe: ", rec.Code, " ", rec.Body.String())
		stop()
		<-ctx.Done()
		return nil
	}, leader.WithHealth(health))
	fmt.Println("stopped:", errors.Is(err, context.Canceled), "healthy:", health.Check() == nil)
	// Output:
	// leading, probe: 200 ok
	// stopped: true healthy: true
}
