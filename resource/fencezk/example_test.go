package fencezk_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A holder keeps its output in a znode fenced with its lease's token; a
// paused holder with an older token is refused by the register.
func ExampleRegister() {
	ctx := context.Background()
	s, err := zookeeper.Connect(ctx, zktest.ExampleServers()) // e.g. []string{"zk1:2181,zk2:2181/myapp"}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m, _ := mutex.New(s, "/locks/report")
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	reg, _ := fencezk.New(s, "/data/report")
	_, err = reg.Write(ctx, lease.Token(), []byte("totals: 42"))
	fmt.Println("write:", err)
	_, err = reg.Write(ctx, lease.Token()-1, []byte("late write of an older holder"))
	fmt.Println("older token refused:", errors.Is(err, fence.ErrStale))
	v, _ := reg.Read(ctx)
	fmt.Printf("%q, token is the lease's: %v\n", v.Data, v.Token == lease.Token())
	// Output:
	// write: <nil>
	// older token refused: true
	// "totals: 42", token is the lease's: true
}
