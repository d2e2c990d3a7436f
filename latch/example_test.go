package latch_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/latch"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A singleton worker: join the election, work only while leading, fence
// every write with the grant's token, and leave for good at shutdown.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	l, err := latch.New(s, "/election/report-writer", "host-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close(context.Background()) // final: the node is gone when it returns
	if err := l.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	lease, err := l.Await(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader:", l.IsLeader())
	health, _ := leader.NewHealth(0) // a liveness probe: http.Handle("/healthz", health)
	defer health.Track(lease)()      // the work below leads until it returns
	fmt.Println("healthy:", health.Check() == nil)

	var guard fence.Guard // lives at the resource
	err = guard.Do("report", lease.Token(), func() error {
		select {
		case <-lease.Context().Done(): // leadership ended: don't start
			return context.Cause(lease.Context())
		default:
		}
		fmt.Println("report written")
		return nil
	})
	fmt.Println("error:", err)
	leader, _ := l.Leader(ctx)
	fmt.Println("leader id:", string(leader.Data))
	// Output:
	// leader: true
	// healthy: true
	// report written
	// error: <nil>
	// leader id: host-1
}

// Listen delivers every change of leadership in order, ending with a final
// "not leader" at Close, after which the channel is closed.
func ExampleLatch_Listen() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	l, _ := latch.New(s, "/election/scheduler", "node-a")
	changes := l.Listen(ctx)
	if err := l.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	c := <-changes
	fmt.Println("leader:", c.Leader)
	l.Close(ctx)
	for c := range changes {
		fmt.Println("leader:", c.Leader, "cause:", c.Cause)
	}
	// Output:
	// leader: true
	// leader: false cause: latch: closed
}

// Two participants: the first to join leads; when it leaves, the second
// takes over with a larger fencing token.
func ExampleLatch_Participants() {
	ctx := context.Background()
	servers := zktest.ExampleServers()
	s1, _ := zookeeper.Connect(ctx, servers)
	defer s1.Close()
	s2, _ := zookeeper.Connect(ctx, servers)
	defer s2.Close()
	a, _ := latch.New(s1, "/election/primary", "a")
	b, _ := latch.New(s2, "/election/primary", "b")
	defer b.Close(ctx)
	a.Start(ctx)
	la, _ := a.Await(ctx)
	b.Start(ctx)
	ps, _ := b.Participants(ctx)
	for _, p := range ps {
		fmt.Println("participant:", string(p.Data))
	}
	la.Release(ctx) // = a.Close(ctx)
	lb, _ := b.Await(ctx)
	fmt.Println("b leads with a larger token:", lb.Token() > la.Token())
	// Output:
	// participant: a
	// participant: b
	// b leads with a larger token: true
}
