package multilock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Move stock between two warehouses: both locks or neither, each write
// fenced with the token of the lock that guards it. Another program that
// takes the same two locks, named in either order, takes them in the same
// key order and cannot deadlock with this one.
func Example() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	north, _ := mutex.New(s, "/locks/stock/north")
	south, _ := mutex.New(s, "/locks/stock/south")
	m, err := multilock.New(
		multilock.Part{Key: "zk:/locks/stock/south", Lock: south},
		multilock.Part{Key: "zk:/locks/stock/north", Lock: north},
	)
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

	var northStock, southStock fence.Guard // each lives at its resource
	err = errors.Join(
		northStock.Do("north", lease.Token("zk:/locks/stock/north"), func() error { return nil }),
		southStock.Do("south", lease.Token("zk:/locks/stock/south"), func() error { return nil }),
	)
	fmt.Println("moved:", err == nil, "order:", m.Keys())

	_, err = north.TryAcquire(ctx) // each part is held
	fmt.Println("north held:", errors.Is(err, recipe.ErrLocked))
	// Output:
	// moved: true order: [zk:/locks/stock/north zk:/locks/stock/south]
	// north held: true
}
