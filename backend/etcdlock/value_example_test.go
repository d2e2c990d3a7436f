package etcdlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A shared setting on etcd: written with compare-and-set (Version is the
// key's mod revision), followed with Watch.
func ExampleNewValue() {
	ctx := context.Background()
	s, err := etcdlock.Connect(ctx, etcdtest.ExampleURL()) // e.g. "etcd://etcd1:2379,etcd2:2379/myapp"
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	v, err := etcdlock.NewValue(s, "config/log-level")
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
			fmt.Printf("watcher sees %s\n", c.Data)
			break
		}
	}
	// Output:
	// set: false
	// stale write refused
	// watcher sees info
}
