package recipe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Connect with a chroot, a session timeout and the opt-in suspension policy,
// then watch the connection states.
func ExampleConnect() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181", "zk2:2181/myapp"}
	s, err := recipe.Connect(ctx, servers,
		recipe.WithSessionTimeout(6*time.Second),
		recipe.WithSuspendPolicy(recipe.TolerateSuspension(0.5)),
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
	s, err := recipe.Connect(ctx, zktest.ExampleServers())
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
