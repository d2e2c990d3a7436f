package etcdlock_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// Workers register under their own id, carrying their address; anyone can
// list them, or watch the list. A worker stops its work when its
// registration's context ends (it may be dropped by others then), and
// leaves when done.
func ExampleGroup() {
	ctx := context.Background()
	s, err := etcdlock.Connect(ctx, etcdtest.ExampleURL()) // e.g. "etcd://etcd1:2379,etcd2:2379/myapp"
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	workers, err := etcdlock.NewGroup(s, "workers")
	if err != nil {
		fmt.Println(err)
		return
	}
	me, err := workers.Join(ctx, "worker-1", []byte("10.0.0.1:8080"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer me.Leave(context.Background())
	registered, err := me.Registered(ctx) // ends when others may drop this worker
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("registered:", registered.Err() == nil)

	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	views := workers.Watch(watchCtx)
	first := <-views // at once
	for _, m := range first.Members {
		fmt.Printf("%s at %s\n", m.ID, m.Data)
	}
	if err := me.Update(ctx, []byte("10.0.0.1:9090")); err != nil {
		fmt.Println(err)
		return
	}
	next := <-views
	fmt.Printf("%s moved to %s\n", next.Members[0].ID, next.Members[0].Data)
	// Output:
	// registered: true
	// worker-1 at 10.0.0.1:8080
	// worker-1 moved to 10.0.0.1:9090
}
