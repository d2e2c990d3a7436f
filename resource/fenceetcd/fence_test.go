package fenceetcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestDo: the first token, an equal one and a newer one are accepted with
// their ops; an older one is refused with the highest accepted, and none of
// its ops lands; the gets of ops read the state written over.
func TestDo(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	data := e.prefix + "/data/report"
	for _, c := range []struct {
		tok  fence.Token
		val  string
		prev fence.Token
	}{{7, "a", 0}, {7, "b", 7}, {9, "c", 7}} {
		res, err := f.Do(ctx, "report", c.tok, clientv3.OpGet(data), clientv3.OpPut(data, c.val))
		if err != nil || res.Prev != c.prev || len(res.Responses) != 2 || res.Revision == 0 {
			t.Fatalf("Do(%v, %q) = %+v, %v; want prev %v and two answers", c.tok, c.val, res, err, c.prev)
		}
	}
	res, err := f.Do(ctx, "report", 8, clientv3.OpPut(data, "late"), clientv3.OpDelete(e.prefix+"/data/other"))
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Highest != 9 || se.Token != 8 || se.Resource != "report" {
		t.Fatalf("older token: %+v, %v; want a StaleError with highest 9", res, err)
	}
	if got := e.get(t, data); got != "c" {
		t.Fatalf("data after the stale write: %q, want c", got)
	}
	if h, err := f.Highest(ctx, "report"); h != 9 || err != nil {
		t.Fatalf("Highest = %v, %v", h, err)
	}
	if h, err := f.Highest(ctx, "none"); h != 0 || err != nil {
		t.Fatalf("Highest of a new resource = %v, %v", h, err)
	}
	// Resources are independent; the largest token is accepted.
	if _, err := f.Do(ctx, "other", fence.MaxToken); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, "other", fence.MaxToken-1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("below MaxToken after it: %v", err)
	}
}

// TestBadInput: what Do refuses before sending anything, and that it sent
// nothing (no key appears).
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	fencetest.RunBadCalls(t, bare(f))
	fk := e.prefix + "/fence/r"
	for _, c := range []struct {
		name     string
		resource string
		tok      fence.Token
		ops      []clientv3.Op
		want     error
	}{
		{"put of the fence key", "r", 5, []clientv3.Op{clientv3.OpPut(fk, "9999999999999999999")}, fenceetcd.ErrBadOp},
		{"put of another fence key", "r", 5, []clientv3.Op{clientv3.OpPut(e.prefix+"/fence/x", "1")}, fenceetcd.ErrBadOp},
		{"delete of the fence key", "r", 5, []clientv3.Op{clientv3.OpDelete(fk)}, fenceetcd.ErrBadOp},
		{"delete of a prefix covering it", "r", 5, []clientv3.Op{clientv3.OpDelete(e.prefix+"/", clientv3.WithPrefix())}, fenceetcd.ErrBadOp},
		{"delete from a key before it", "r", 5, []clientv3.Op{clientv3.OpDelete(e.prefix+"/a", clientv3.WithFromKey())}, fenceetcd.ErrBadOp},
		{"delete of a range into it", "r", 5, []clientv3.Op{clientv3.OpDelete(e.prefix+"/a", clientv3.WithRange(e.prefix+"/fence/s"))}, fenceetcd.ErrBadOp},
		{"nested transaction", "r", 5, []clientv3.Op{clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(fk, "1")}, nil)}, fenceetcd.ErrBadOp},
	} {
		if _, err := f.Do(ctx, c.resource, c.tok, c.ops...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if k := e.keys(t); len(k) != 0 {
		t.Fatalf("refused calls left keys: %q", k)
	}
	// A delete of a range that ends before the prefix, or starts after it, is fine.
	if _, err := f.Do(ctx, "r", 5, clientv3.OpDelete(e.prefix+"/a", clientv3.WithRange(e.prefix+"/fence/")),
		clientv3.OpDelete(e.prefix+"/fence0", clientv3.WithFromKey())); err != nil {
		t.Fatalf("ranges beside the prefix: %v", err)
	}
	if _, err := fenceetcd.New(e.cli, ""); !errors.Is(err, fenceetcd.ErrBadPrefix) {
		t.Fatalf("empty prefix: %v", err)
	}
	if _, err := fenceetcd.New(e.cli, "\xff"); !errors.Is(err, fenceetcd.ErrBadPrefix) {
		t.Fatalf("invalid UTF-8 prefix: %v", err)
	}
	// etcd's own refusal (two puts of one key) is certain: nothing applied.
	_, err := f.Do(ctx, "r", 6, clientv3.OpPut(e.prefix+"/d", "1"), clientv3.OpPut(e.prefix+"/d", "2"))
	if err == nil || errors.Is(err, fence.ErrUncertain) {
		t.Fatalf("duplicate key: %v, want etcd's refusal", err)
	}
	// More ops than etcd takes in one transaction (--max-txn-ops, 128 by
	// default, one is the fence's put): refused, certainly.
	many := make([]clientv3.Op, 128)
	for i := range many {
		many[i] = clientv3.OpPut(fmt.Sprintf("%s/m%d", e.prefix, i), "v")
	}
	if _, err := f.Do(ctx, "r", 6, many...); err == nil || errors.Is(err, fence.ErrUncertain) {
		t.Fatalf("128 ops: %v, want etcd's refusal", err)
	}
	if _, err := f.Do(ctx, "r", 6, many[:127]...); err != nil {
		t.Fatalf("127 ops: %v", err)
	}
	if h, _ := f.Highest(ctx, "r"); h != 6 {
		t.Fatalf("the mark is %v, want 6 (the refused transactions moved nothing)", h)
	}
}

// TestNotFence: a fence key or a register holding another program's value
// is reported, not overwritten.
func TestNotFence(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	if _, err := e.cli.Put(ctx, e.prefix+"/fence/r", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, "r", 5); !errors.Is(err, fenceetcd.ErrNotFence) {
		t.Fatalf("Do over a foreign value: %v", err)
	}
	if _, err := f.Highest(ctx, "r"); !errors.Is(err, fenceetcd.ErrNotFence) {
		t.Fatalf("Highest of a foreign value: %v", err)
	}
	if got := e.get(t, e.prefix+"/fence/r"); got != "hello" {
		t.Fatalf("the foreign value became %q", got)
	}
	// 19 digits above fence.MaxToken, which would refuse every token.
	if _, err := e.cli.Put(ctx, e.prefix+"/fence/big", "9223372036854775808"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, "big", fence.MaxToken); !errors.Is(err, fenceetcd.ErrNotFence) {
		t.Fatalf("Do under a token above MaxToken: %v", err)
	}
}

// TestRaiseFloor: fencetest's floor scenario.
func TestRaiseFloor(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	fencetest.RunRaiseFloor(t, bare(f), f.RaiseFloor)
}

// TestFloorCeiling: fencetest's floors no era reaches, on the fence and
// on a register. Before, a floor of MaxToken was accepted, and locked the
// resource against every real grant.
func TestFloorCeiling(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	fencetest.RunFloorCeiling(t, f.RaiseFloor, bare(f))
	reg := fencetest.PerResource(t, func(resource string) (*fenceetcd.Register, error) {
		return fenceetcd.NewRegister(e.cli, e.prefix+"/reg/"+resource)
	})
	fencetest.RunFloorCeiling(t, func(ctx context.Context, resource string, floor fence.Token) (fence.Token, error) {
		return reg(resource).RaiseFloor(ctx, floor)
	}, func(ctx context.Context, resource string, tok fence.Token) error {
		_, _, err := reg(resource).Write(ctx, tok, []byte("v"))
		return err
	})
}

// bare is f.Do with no ops: a call that only records the token.
func bare(f *fenceetcd.Fence) func(ctx context.Context, resource string, tok fence.Token) error {
	return func(ctx context.Context, resource string, tok fence.Token) error {
		_, err := f.Do(ctx, resource, tok)
		return err
	}
}

// TestUncertain: fencetest's lost-answer scenario (the connection breaks
// after etcd applied the transaction and before its answer arrived).
func TestUncertain(t *testing.T) {
	e := newEnv(t)
	cli, p := e.proxied(t)
	f, _ := fenceetcd.New(cli, e.prefix+"/fence/")
	data := e.prefix + "/data"
	do := func(ctx context.Context, tok fence.Token, v string) error {
		var ops []clientv3.Op
		if v != "" {
			ops = append(ops, clientv3.OpPut(data, v))
		}
		_, err := f.Do(ctx, "r", tok, ops...)
		return err
	}
	fencetest.RunUncertain(t, p, do, func() string { return e.get(t, data) })
}
