package etcdlock_test

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A service keeps its configuration, the keys below <prefix>/config, in a
// local cache: it reads it without a round trip, and hears of each change.
func ExampleNewCache() {
	ctx := context.Background()
	s, err := etcdlock.Connect(ctx, etcdtest.ExampleURL()) // e.g. "etcd://etcd1:2379,etcd2:2379/myapp"
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	cli, dir := s.Client(), s.Prefix()+"/config"
	defer cli.Delete(context.Background(), dir, clientv3.WithPrefix()) // the example leaves no key behind
	if _, err := cli.Put(ctx, dir+"/db", "postgres://db1"); err != nil {
		fmt.Println(err)
		return
	}

	config, err := etcdlock.NewCache(s, "config") // the key and every key below it
	if err != nil {
		fmt.Println(err)
		return
	}
	defer config.Close()
	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	events := config.Listen(listenCtx)
	for ev := range events { // the content, then CacheInitialized
		if ev.Kind == recipe.CacheInitialized {
			fmt.Println("loaded")
			break
		}
		fmt.Println(ev.Kind, ev.Node.Path, string(ev.Node.Data))
	}
	if _, err := cli.Put(ctx, dir+"/cache", "redis://r1"); err != nil {
		fmt.Println(err)
		return
	}
	ev := <-events
	fmt.Println(ev.Kind, ev.Node.Path, string(ev.Node.Data))
	if db, ok := config.Get("config/db"); ok {
		fmt.Println("db is", string(db.Data))
	}
	// Output:
	// created config/db postgres://db1
	// loaded
	// created config/cache redis://r1
	// db is postgres://db1
}
