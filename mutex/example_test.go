package mutex_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A cron job that must not double-fire: take the lock, fence the write with
// the lease's token, stop when the lease context ends.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := recipe.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := mutex.New(s, "/locks/nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	var guard fence.Guard // lives at the resource
	err = guard.Do("report", lease.Token(), func() error {
		select {
		case <-lease.Context().Done(): // ownership in doubt: don't start
			return context.Cause(lease.Context())
		default:
		}
		fmt.Println("report written")
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// report written
	// error: <nil>
}

// TryAcquire is the cron-singleton answer: if another instance holds the
// lock, skip this run.
func ExampleMutex_TryAcquire() {
	ctx := context.Background()
	servers := zktest.ExampleServers()
	s1, _ := recipe.Connect(ctx, servers)
	defer s1.Close()
	s2, _ := recipe.Connect(ctx, servers)
	defer s2.Close()
	m1, _ := mutex.New(s1, "/locks/cron/hourly")
	m2, _ := mutex.New(s2, "/locks/cron/hourly")

	lease, err := m1.TryAcquire(ctx)
	fmt.Println("first instance:", err)
	_, err = m2.TryAcquire(ctx)
	fmt.Println("second instance held off:", errors.Is(err, recipe.ErrLocked))
	lease.Release(ctx)
	// Output:
	// first instance: <nil>
	// second instance held off: true
}
