package counter_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/counter"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/value"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Workers count the jobs they have done in one shared counter, here a
// ZooKeeper value (an etcd one, etcdlock.NewValue, does as well): every
// Add is counted once, however many run at once.
func Example() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers()) // e.g. []string{"zk1:2181,zk2:2181/myapp"}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	v, err := value.New(s, "/stats/jobs-done")
	if err != nil {
		fmt.Println(err)
		return
	}
	jobs := counter.New(v)

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := jobs.Add(ctx, 1); err != nil {
					fmt.Println(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n, err := jobs.Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("jobs done:", n)
	// Output:
	// jobs done: 30
}
