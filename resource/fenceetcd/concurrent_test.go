package fenceetcd_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/fencerace"
)

var (
	runFor  = flag.Duration("fenceetcd.duration", 700*time.Millisecond, "length of each concurrent run")
	workers = flag.Int("fenceetcd.workers", 8, "concurrent writers")
)

// The concurrent runs are fencerace.Run and Verify (the register check of
// fencesql's runs) over this backend's writes.

// cfg is the shape of the run of the register called name.
func cfg(name string, d time.Duration) fencerace.Config {
	return fencerace.Config{Register: name, Workers: *workers, For: d, Seed: 25}
}

// doWrite writes value through Fence.Do: a put of the data key with its
// previous value, the fence's previous token, and the revision.
func doWrite(f *fenceetcd.Fence, data string) fencerace.Writer {
	return func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		res, err := f.Do(ctx, "reg", tok, clientv3.OpPut(data, value, clientv3.WithPrevKV()))
		if err != nil {
			return nemesis.State{}, 0, err
		}
		prev := nemesis.State{Token: res.Prev}
		if kv := res.Responses[0].GetResponsePut().GetPrevKv(); kv != nil {
			prev.Value = string(kv.Value)
		}
		return prev, res.Revision, nil
	}
}

// TestConcurrentDo: Fence.Do with a put of the caller's data key.
func TestConcurrentDo(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	data := e.prefix + "/data"
	ops, end := fencerace.Run(t, cfg("etcd-do", *runFor), doWrite(f, data))
	high, err := f.Highest(context.Background(), "reg")
	if err != nil {
		t.Fatal(err)
	}
	fencerace.Check(t, cfg("etcd-do", 0), ops, end, nemesis.State{Token: high, Value: e.get(t, data)})
}

// TestConcurrentRegister: Register.Write.
func TestConcurrentRegister(t *testing.T) {
	e := newEnv(t)
	r, _ := fenceetcd.NewRegister(e.cli, e.prefix+"/reg")
	ops, end := fencerace.Run(t, cfg("etcd-register", *runFor), func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		prev, rev, err := r.Write(ctx, tok, []byte(value))
		return nemesis.State{Token: prev.Token, Value: string(prev.Data)}, rev, err
	})
	v, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fencerace.Check(t, cfg("etcd-register", 0), ops, end, nemesis.State{Token: v.Token, Value: string(v.Data)})
}

// TestConcurrentCheckCatchesRacyFence plants the bug the transaction
// exists to prevent: the token is read and compared in the client, then
// written with the data in a transaction that no longer compares. The same
// run and checker must find violations (a write over a higher token, a
// lost update), or the check above proves nothing.
func TestConcurrentCheckCatchesRacyFence(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	fk, _ := f.Key("reg")
	data := e.prefix + "/data"
	racy := func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		high, err := f.Highest(ctx, "reg")
		if err != nil {
			return nemesis.State{}, 0, err
		}
		if tok < high {
			return nemesis.State{}, 0, &fence.StaleError{Resource: "reg", Token: tok, Highest: high}
		}
		time.Sleep(time.Millisecond) // the window a paused client has
		resp, err := e.cli.Txn(ctx).Then(clientv3.OpPut(fk, fmt.Sprintf("%019d", tok), clientv3.WithPrevKV()),
			clientv3.OpPut(data, value, clientv3.WithPrevKV())).Commit()
		if err != nil {
			return nemesis.State{}, 0, err
		}
		var prev nemesis.State
		if kv := resp.Responses[0].GetResponsePut().GetPrevKv(); kv != nil {
			n, _ := strconv.ParseUint(string(kv.Value), 10, 64)
			prev.Token = fence.Token(n)
		}
		if kv := resp.Responses[1].GetResponsePut().GetPrevKv(); kv != nil {
			prev.Value = string(kv.Value)
		}
		return prev, resp.Header.Revision, nil
	}
	ops, end := fencerace.Run(t, cfg("etcd-racy", *runFor/2), racy)
	high, _ := f.Highest(context.Background(), "reg")
	v := fencerace.Verify(t, cfg("etcd-racy", 0), ops, end, nemesis.State{Token: high, Value: e.get(t, data)}, true)
	if len(v) == 0 {
		t.Fatal("the checker found nothing wrong with a fence that compares outside the transaction")
	}
	t.Logf("first of %d violations: %s", len(v), v[0])
}
