package election_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/election"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// Explicit campaigning: become the leader, fence the leader's work with the
// lease's token, resign.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	e, err := election.New(s, "/services/scheduler")
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := e.Campaign(ctx, []byte("host-a:8080")) // blocks until leader
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, err := e.Leader(ctx)
	fmt.Println("leader:", string(leader.Value), leader.Token == lease.Token(), err)

	var guard fence.Guard // lives at the resource
	err = guard.Do("schedule", lease.Token(), func() error {
		if lease.Context().Err() != nil { // leadership in doubt: don't start
			return context.Cause(lease.Context())
		}
		fmt.Println("jobs scheduled")
		return nil
	})
	fmt.Println("error:", err)

	if err := e.Resign(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = e.Leader(ctx)
	fmt.Println("after Resign:", errors.Is(err, election.ErrNoLeader))
	// Output:
	// leader: host-a:8080 true <nil>
	// jobs scheduled
	// error: <nil>
	// after Resign: true
}

// Run is the loop most services want: lead while elected, with a context
// that ends when leadership does, and campaign again afterwards, until the
// service shuts down. Run then returns ctx's cause (context.Canceled here):
// a normal stop, as http.ErrServerClosed is from http.Server.Serve.
func ExampleRun() {
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	e, err := election.New(s, "/services/scheduler")
	if err != nil {
		fmt.Println(err)
		return
	}
	var guard fence.Guard // lives at the resource
	err = election.Run(ctx, e, []byte("host-a:8080"), func(ctx context.Context, token fence.Token) error {
		fmt.Println("leading")
		if err := guard.Do("schedule", token, func() error {
			fmt.Println("jobs scheduled")
			return nil
		}); err != nil {
			return err
		}
		shutdown() // for the example: the service shuts down while leading
		<-ctx.Done()
		fmt.Println("leadership ended:", context.Cause(ctx))
		return nil
	})
	if ctx.Err() != nil { // stopped by us: err is context.Cause(ctx)
		fmt.Println("Run stopped:", err, errors.Is(err, context.Canceled))
	} else {
		fmt.Println("Run failed:", err) // e.g. recipe.ErrMixedRecipes: see recipe.Permanent
	}
	// Output:
	// leading
	// jobs scheduled
	// leadership ended: context canceled
	// Run stopped: context canceled true
}

// An observer sees every leader and the gaps between them (case C16).
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	servers := zktest.ExampleServers()
	s1, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s1.Close()
	s2, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s2.Close()
	watcher, _ := election.New(s1, "/services/scheduler")
	candidate, _ := election.New(s2, "/services/scheduler")

	states := watcher.Observe(ctx)
	show := func(o election.Observation) {
		if !o.Present {
			fmt.Println("no leader")
			return
		}
		fmt.Println("leader:", string(o.Leader.Value))
	}
	show(<-states)
	if _, err := candidate.Campaign(ctx, []byte("host-b:8080")); err != nil {
		fmt.Println(err)
		return
	}
	show(<-states)
	if err := candidate.Resign(ctx); err != nil {
		fmt.Println(err)
		return
	}
	show(<-states)
	// Output:
	// no leader
	// leader: host-b:8080
	// no leader
}
