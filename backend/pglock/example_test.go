package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
)

// A job that must not run twice at once, on PostgreSQL: take the lock, fence
// the write with the lease's token, stop when the lease context ends. The
// code after New is the same for every backend (recipe.Lock).
func Example() {
	ctx := context.Background()
	url := pgtest.ExampleDSN() // e.g. "postgres://app@db.internal:5432/app?sslmode=verify-full"

	s, err := pglock.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	var m recipe.Lock
	m, err = pglock.New(s, "nightly-report")
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
		if lease.Context().Err() != nil { // ownership in doubt: don't start
			return context.Cause(lease.Context())
		}
		fmt.Println("report written with token", lease.Token())
		return nil
	})
	fmt.Println("error:", err)

	// Another instance skips its run while this one holds the lock.
	s2, err := pglock.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s2.Close()
	other, _ := pglock.New(s2, "nightly-report")
	_, err = other.TryAcquire(ctx)
	fmt.Println("second instance:", errors.Is(err, recipe.ErrLocked))
	// Output:
	// report written with token 1
	// error: <nil>
	// second instance: true
}

// A lock for a resource that cannot check fencing tokens (a mailer): with
// a lock-delay, a grant that follows a holder that died without releasing
// waits 30 s first, so the dead holder's sends in flight land before the
// next holder's. After a Release there is no wait.
func ExampleWithLockDelay() {
	ctx := context.Background()
	s, err := pglock.Connect(ctx, pgtest.ExampleDSN())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := pglock.New(s, "mailer", pglock.WithLockDelay(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("delay served:", recipe.LockDelayServed(lease))
	fmt.Println("release:", lease.Release(ctx)) // a clean end: the next grant waits none
	// Output:
	// delay served: 0s
	// release: <nil>
}

// Who holds a lock, as the server records it: the identity each Session's
// grants record (WithIdentity), the grant's token, and a channel that
// follows every change, read every WithPollInterval.
func ExampleMutex_ObserveHolder() {
	ctx := context.Background()
	s, err := pglock.Connect(ctx, pgtest.ExampleDSN(), pglock.WithIdentity("report-worker-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := pglock.New(s, "nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	octx, stop := context.WithCancel(ctx)
	defer stop() // ends the observer
	states := m.ObserveHolder(octx)
	fmt.Println(<-states)

	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-states)
	st, err := m.Holder(ctx) // one read, now
	fmt.Println(st.Holder.Token == lease.Token(), err)
	lease.Release(ctx)
	fmt.Println(<-states)
	// Output:
	// free
	// held by "report-worker-1" with token 1
	// true <nil>
	// free
}
