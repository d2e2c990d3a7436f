// Command user is a service as a user of the library writes it, built by
// TestInstallFromProxy in a module outside the repository: it takes a lock
// on the ZooKeeper ensemble named by its argument and on memlock, and
// prints each lease's token.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: user host:port[,host:port][/chroot]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "user:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, servers string) error {
	s, err := zookeeper.Connect(ctx, []string{servers})
	if err != nil {
		return err
	}
	defer s.Close()
	zl, err := mutex.New(s, "/locks/user")
	if err != nil {
		return err
	}
	if err := hold(ctx, "zookeeper", zl); err != nil {
		return err
	}

	srv, err := memlock.NewServer()
	if err != nil {
		return err
	}
	defer srv.Close()
	ms := srv.Connect()
	defer ms.Close()
	ml, err := memlock.New(ms, "/locks/user")
	if err != nil {
		return err
	}
	return hold(ctx, "memlock", ml)
}

// hold acquires l, prints the lease's token and releases it.
func hold(ctx context.Context, name string, l recipe.Lock) error {
	lease, err := l.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Printf("%s: token %d\n", name, lease.Token())
	return lease.Release(ctx)
}
