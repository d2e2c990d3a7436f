package barrier_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/barrier"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A deploy freeze: workers wait while the barrier is set, and go on once it
// is removed.
func ExampleBarrier() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	b, err := barrier.New(s, "/deploy/freeze")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := b.Set(ctx); err != nil {
		fmt.Println(err)
		return
	}
	waited := make(chan error)
	go func() { waited <- b.Wait(ctx) }() // a worker, usually in another process
	fmt.Println("remove:", b.Remove(ctx))
	fmt.Println("wait:", <-waited)
	// Output:
	// remove: <nil>
	// wait: <nil>
}

// Three workers on Sessions of their own start a job's computation together
// and finish it together.
func ExampleDoubleBarrier() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	const workers = 3
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() { errs[i] = work(ctx, servers, fmt.Sprintf("worker-%d", i), workers) })
	}
	wg.Wait()
	fmt.Println(errs)
	// Output:
	// [<nil> <nil> <nil>]
}

// work is one worker: enter, compute, leave.
func work(ctx context.Context, servers []string, id string, n int) error {
	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := barrier.NewDouble(s, "/jobs/42/barrier", n, barrier.WithData([]byte(id)))
	if err != nil {
		return err
	}
	if err := d.Enter(ctx); err != nil { // all n are in
		return err
	}
	// ... the computation ...
	return d.Leave(ctx) // all n are out
}
