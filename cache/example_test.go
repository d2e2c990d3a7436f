package cache_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/cache"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A service follows its configuration subtree: the content first, then
// every change, with no hand-written watch.
func Example() {
	ctx := context.Background()
	servers := zktest.ExampleServers() // e.g. []string{"zk1:2181,zk2:2181/myapp"}

	s, err := zookeeper.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	c, err := cache.New(s, "/example-config")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	lctx, stop := context.WithCancel(ctx)
	defer stop()
	events := c.Listen(lctx)
	for e := range events {
		if e.Kind == recipe.CacheInitialized {
			break // an empty tree: nothing came before
		}
	}
	// Another process writes the configuration (here, through the same
	// Session's connection, below the example's chroot).
	last := servers[len(servers)-1]
	root := last[strings.Index(last, "/"):] + "/example-config" // the chroot's
	conn := s.Conn()
	conn.Create(root, []byte("v1"), 0, zk.WorldACL(zk.PermAll))
	conn.Create(root+"/timeout", []byte("5s"), 0, zk.WorldACL(zk.PermAll))
	defer conn.Delete(root, -1)
	defer conn.Delete(root+"/timeout", -1)

	for e := range events {
		fmt.Println(e.Kind, e.Node.Path, string(e.Node.Data))
		if e.Node.Path == "/example-config/timeout" {
			break
		}
	}
	n, _ := c.Get("/example-config/timeout")
	fmt.Println("timeout is", string(n.Data))
	// Output:
	// created /example-config v1
	// created /example-config/timeout 5s
	// timeout is 5s
}
