package fenceetcd_test

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
)

// A holder keeps its output in etcd, written in one transaction with its
// lease's token; a paused holder with an older token is refused and its
// write never lands.
func ExampleFence_Do() {
	ctx := context.Background()
	s, err := etcdlock.Connect(ctx, etcdtest.ExampleURL()) // e.g. "etcd://etcd1:2379,etcd2:2379/myapp"
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	cli := s.Client()
	defer cli.Delete(context.Background(), s.Prefix()+"/", clientv3.WithPrefix()) // the example leaves no key
	m, _ := etcdlock.New(s, "locks/report")
	lease, err := m.Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())

	f, _ := fenceetcd.New(cli, s.Prefix()+"/fence/")
	data := s.Prefix() + "/data/report"
	_, err = f.Do(ctx, "report", lease.Token(), clientv3.OpPut(data, "totals: 42"))
	fmt.Println("write:", err)
	_, err = f.Do(ctx, "report", lease.Token()-1, clientv3.OpPut(data, "late write of an older holder"))
	fmt.Println("older token refused:", errors.Is(err, fence.ErrStale))
	resp, _ := cli.Get(ctx, data)
	fmt.Printf("%s\n", resp.Kvs[0].Value)
	// Output:
	// write: <nil>
	// older token refused: true
	// totals: 42
}
