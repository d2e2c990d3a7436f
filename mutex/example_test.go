package mutex_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A cron job that must not double-fire: take the lock, fence the write with
// the lease's token, stop when the lease context ends.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
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
	s1, _ := zookeeper.Connect(ctx, servers)
	defer s1.Close()
	s2, _ := zookeeper.Connect(ctx, servers)
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

// Readers share the lock; a writer excludes them. A write holder can
// downgrade to a read without losing its place in the queue.
func ExampleNewRW() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	rw, err := mutex.NewRW(s, "/locks/catalog")
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := rw.WriteLock().Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... write the catalog, fenced with w.Token() ...
	r, err := rw.Downgrade(ctx, w) // keep reading what we wrote; writers queued meanwhile still wait
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Release(ctx) // other readers may join now
	_, err = rw.WriteLock().TryAcquire(ctx)
	fmt.Println("a writer must wait for the read:", errors.Is(err, recipe.ErrLocked))
	r.Release(ctx)
	// Output:
	// a writer must wait for the read: true
}

// A semaphore bounds concurrency across processes: here at most two
// exports run at once.
func ExampleNewSemaphore() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	sem, err := mutex.NewSemaphore(s, "/semaphores/exports", 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := sem.Acquire(ctx)
	b, _ := sem.Acquire(ctx)
	_, err = sem.TryAcquire(ctx)
	fmt.Println("third export held off:", errors.Is(err, recipe.ErrLocked))
	a.Release(ctx)
	c, err := sem.TryAcquire(ctx)
	fmt.Println("after a release:", err)
	b.Release(ctx)
	c.Release(ctx)
	// Output:
	// third export held off: true
	// after a release: <nil>
}

// Who holds a lock, read from outside without contending: the holder's
// published ID (WithData) and token, then every change.
func ExampleMutex_ObserveHolder() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	holder, _ := mutex.New(s, "/locks/observed", mutex.WithData([]byte("host-a:4711")))
	watcher, _ := mutex.New(s, "/locks/observed")
	states := watcher.ObserveHolder(ctx)
	fmt.Println(<-states) // at once: nobody holds it

	lease, err := holder.Acquire(ctx)
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
	// host-a:4711 true
	// free
}

// Programs that must agree on a semaphore's limit store it with the
// directory: the first Acquire stores its n, a program built with another
// n is refused, and changing the limit is an explicit operation, which
// OpenSemaphore's contenders follow.
func ExampleStoredLimit() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	const path = "/locks/encoders"
	sem, err := mutex.NewSemaphore(s, path, 2, mutex.StoredLimit())
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := sem.Acquire(ctx) // stores "limit 2": none was stored
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	other, _ := mutex.NewSemaphore(s, path, 3, mutex.StoredLimit())
	_, err = other.Acquire(ctx)
	fmt.Println("a contender with n=3 refused:", errors.Is(err, mutex.ErrLimitMismatch))

	if err := mutex.SetSemaphoreLimit(ctx, s, path, 4); err != nil {
		fmt.Println(err)
		return
	}
	open, _ := mutex.OpenSemaphore(s, path)
	l, err := open.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(context.Background())
	fmt.Println("limit now:", open.Leases())
	// Output:
	// a contender with n=3 refused: true
	// limit now: 4
}
