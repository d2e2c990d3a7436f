package group_test

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/group"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A service registers itself while it runs, and a client lists the
// registered instances and follows their changes.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	g, err := group.New(s, "/services/api")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := g.Join(ctx, "host-1", []byte("10.0.0.1:8080"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Leave(context.Background()) // the node is gone when it returns

	v, err := g.Members(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, x := range v.Members {
		fmt.Printf("%s at %s\n", x.ID, x.Data)
	}

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	views := g.Watch(wctx) // the group now, then after every change
	fmt.Println("watching:", len((<-views).Members), "member")
	if err := m.Update(ctx, []byte("10.0.0.1:9090")); err != nil {
		fmt.Println(err)
		return
	}
	for v := range views {
		if string(v.Members[0].Data) == "10.0.0.1:9090" {
			fmt.Println("moved to", string(v.Members[0].Data))
			break
		}
	}
	// Output:
	// host-1 at 10.0.0.1:8080
	// watching: 1 member
	// moved to 10.0.0.1:9090
}
