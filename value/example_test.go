package value_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/value"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A shared setting: one process writes it with compare-and-set, another
// follows it with Watch.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	v, err := value.New(s, "/config/log-level")
	if err != nil {
		fmt.Println(err)
		return
	}
	cur, err := v.Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("set:", cur.Version != 0)

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	changes := v.Watch(wctx) // the value now, then after every change
	<-changes

	x, err := v.TrySet(ctx, cur.Version, []byte("info")) // Version 0: create it
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := v.TrySet(ctx, cur.Version, []byte("debug")); errors.Is(err, recipe.ErrConflict) {
		fmt.Println("stale write refused")
	}
	for c := range changes {
		if c.Version == x.Version {
			fmt.Printf("watcher sees %s at version %d\n", c.Data, c.Version)
			break
		}
	}
	// Output:
	// set: false
	// stale write refused
	// watcher sees info at version 1
}
