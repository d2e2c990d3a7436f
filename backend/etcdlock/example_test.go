package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A job that must not run twice at once: take the lock, fence the write
// with the lease's token, stop when the lease context ends.
func Example() {
	ctx := context.Background()
	url := etcdtest.ExampleURL() // e.g. "etcd://etcd1:2379,etcd2:2379,etcd3:2379/myapp"

	s, err := etcdlock.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := etcdlock.New(s, "jobs/nightly-report")
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

// TryAcquire skips the run when another instance holds the lock.
func ExampleMutex_TryAcquire() {
	ctx := context.Background()
	url := etcdtest.ExampleURL()
	s1, err := etcdlock.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s1.Close()
	s2, err := etcdlock.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s2.Close()
	m1, _ := etcdlock.New(s1, "cron/cleanup")
	m2, _ := etcdlock.New(s2, "cron/cleanup")

	held, err := m1.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release(ctx)
	_, err = m2.TryAcquire(ctx)
	fmt.Println("second instance skips:", errors.Is(err, recipe.ErrLocked))
	// Output: second instance skips: true
}

// A mailer can't check fencing tokens: with a lock-delay, a holder that
// fails (its process killed, cut off) keeps the next holder out for 30 s
// more, so that its mails in flight have gone before the next run starts.
// After a clean Release the next holder does not wait.
func ExampleWithLockDelay() {
	ctx := context.Background()
	s, err := etcdlock.Connect(ctx, etcdtest.ExampleURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := etcdlock.New(s, "mail/outbox", etcdlock.WithLockDelay(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("delay served:", recipe.LockDelayServed(lease)) // 0: the lock was free
	fmt.Println("release:", lease.Release(ctx))                 // a clean end: no delay for the next
	// Output:
	// delay served: 0s
	// release: <nil>
}

// Who holds the lock: a dashboard follows the holder of a job's lock (its
// ID and token) without contending for it; a worker names itself with
// WithIdentity, and can publish another ID while it holds (Proclaim).
func ExampleMutex_ObserveHolder() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := etcdlock.Connect(ctx, etcdtest.ExampleURL(), etcdlock.WithIdentity("worker-7"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, err := etcdlock.New(s, "jobs/nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	states := m.ObserveHolder(ctx) // closed by cancel, or by s.Close
	fmt.Println(<-states)

	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	st := <-states
	fmt.Println(st.Holder.ID, st.Holder.Token == lease.Token())
	if err := m.Proclaim(ctx, lease, "worker-7 (report 2026-12-07)"); err != nil {
		fmt.Println(err)
	}
	fmt.Println((<-states).Holder.ID)
	if err := lease.Release(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(<-states)
	// Output:
	// free
	// worker-7 true
	// worker-7 (report 2026-12-07)
	// free
}
