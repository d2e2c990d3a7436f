package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Connect, name a lock, hold it, and guard the protected write with the
// lease's fencing token.
func Example() {
	ctx := context.Background()
	url := redistest.ExampleURL() // e.g. "redis://redis.internal:6379/0"
	s, err := redislock.Connect(ctx, url, redislock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := redislock.New(s, "nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	var guard fence.Guard // at the resource: refuses tokens older than the newest it saw
	err = guard.Do("report", lease.Token(), func() error {
		// write, and stop when lease.Context() is done
		return nil
	})
	fmt.Println("write:", err)

	// Another contender is refused while the lease is held.
	if _, err := m.TryAcquire(ctx); errors.Is(err, recipe.ErrLocked) {
		fmt.Println("held")
	}
	lease.Release(ctx)
	fmt.Println(context.Cause(lease.Context()))
	// Output:
	// write: <nil>
	// held
	// recipe: lease released
}

// A lock-delay for a resource that cannot check fencing tokens: when a
// holder ends without Release (crash, partition, Close), the next holder
// starts only after its requests had the delay to drain. After a Release
// the next one starts at once.
func ExampleWithLockDelay() {
	ctx := context.Background()
	s, err := redislock.Connect(ctx, redistest.ExampleURL(), redislock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := redislock.New(s, "mailer", redislock.WithLockDelay(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := m.Acquire(ctx) // waits the rest of a delay if the last holder failed
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("delay served:", recipe.LockDelayServed(lease))
	lease.Release(ctx) // a clean end: the next holder serves no delay
	// Output:
	// delay served: 0s
}

// Watch who holds a lock from outside: the state at once, then each
// change, with the holder's identity and its grant's token.
func ExampleMutex_ObserveHolder() {
	ctx := context.Background()
	s, err := redislock.Connect(ctx, redistest.ExampleURL(),
		redislock.WithIdentity("report-worker"), redislock.WithHolderPoll(100*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := redislock.New(s, "observed-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	states := m.ObserveHolder(octx)
	fmt.Println(<-states)

	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	st := <-states
	fmt.Println(st.Holder.ID, st.Holder.Token == lease.Token())
	lease.Release(ctx)
	fmt.Println(<-states)
	// Output:
	// free
	// report-worker true
	// free
}
