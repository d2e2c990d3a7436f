package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Connect with a chroot, a session timeout and the opt-in suspension policy,
// then watch the connection states.
func ExampleConnect() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181", "zk2:2181/myapp"}
	s, err := zookeeper.Connect(ctx, servers,
		zookeeper.WithSessionTimeout(6*time.Second),
		zookeeper.WithSuspendPolicy(zookeeper.TolerateSuspension(0.5)),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println(s.State(), s.SessionTimeout())
	// Output: CONNECTED 6s
}

// A leader-gated loop: work only while the lease's context is live, and stop
// the moment ownership is in doubt.
func ExampleLease() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, _ := mutex.New(s, "/locks/singleton-loop")
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	work := func(ctx context.Context) { /* ... until ctx is done ... */ }
	work(lease.Context())
	lease.Release(ctx)
	fmt.Println(context.Cause(lease.Context()))
	// Output: recipe: lease released
}

// A custom recipe is a Queue: node kinds, a Rule, and the QueueOptions the
// Rule satisfies. Here a gate lets two holders in at a time; its lowest node
// always holds, which it declares with GrantsLowest.
func ExampleNewQueue() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	twoAtATime := func(_ []zookeeper.NodeName, self int) (bool, []int) {
		if self < 2 {
			return true, nil
		}
		return false, []int{self - 2, self - 1} // either deletion may let self in
	}
	q, err := zookeeper.NewQueue(s, "/gates/two", []string{"gate-"}, twoAtATime, zookeeper.GrantsLowest())
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := q.Acquire(ctx, "gate-", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Release(ctx)
	b, err := q.Acquire(ctx, "gate-", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Release(ctx)
	_, err = q.TryAcquire(ctx, "gate-", nil)
	fmt.Println(errors.Is(err, recipe.ErrLocked))
	// Output: true
}
