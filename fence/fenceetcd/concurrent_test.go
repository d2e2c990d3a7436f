package fenceetcd_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/fence/fenceetcd"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
)

var (
	runFor  = flag.Duration("fenceetcd.duration", 700*time.Millisecond, "length of each concurrent run")
	workers = flag.Int("fenceetcd.workers", 8, "concurrent writers")
)

// The concurrent runs, as fencesql's: writers with interleaved tokens
// (older, equal, newer) write one register; every call and its answer is a
// nemesis.Op, and the history must pass nemesis.CheckRegister (no write
// over a higher token, no lost update, each accepted write over the state
// the previous one left, in etcd's revision order, and linearizable with
// porcupine), with the final state the last accepted write.

// write is one fenced write of value with tok: the state it overwrote and
// its revision, or its error.
type write func(ctx context.Context, tok fence.Token, value string) (prev nemesis.State, seq int64, err error)

// run drives write from *workers goroutines for d and returns the history.
func run(t *testing.T, name string, d time.Duration, w write) (ops []nemesis.Op, end time.Duration) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		newest atomic.Uint64
	)
	newest.Store(10)
	start := time.Now()
	deadline := start.Add(d)
	for c := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 25))
			for i := 0; time.Now().Before(deadline); i++ {
				var tok fence.Token
				switch r := rng.IntN(10); {
				case r < 3:
					tok = fence.Token(max(newest.Load()-uint64(1+rng.IntN(3)), 1))
				case r < 7:
					tok = fence.Token(newest.Load())
				default:
					tok = fence.Token(newest.Add(1))
				}
				op := nemesis.Op{Kind: nemesis.OpWrite, Client: c, Token: tok, Register: name, Value: fmt.Sprintf("w%d-%d", c, i), Call: time.Since(start)}
				prev, seq, err := w(context.Background(), tok, op.Value)
				op.Return = time.Since(start)
				var se *fence.StaleError
				switch {
				case err == nil:
					op.Outcome, op.Prev, op.Seq = nemesis.Accepted, prev, seq
				case errors.As(err, &se):
					op.Outcome = nemesis.Stale
					if se.Highest <= tok {
						t.Errorf("stale answer for token %v names highest %v", tok, se.Highest)
					}
				default:
					t.Errorf("write: %v", err)
					return
				}
				mu.Lock()
				ops = append(ops, op)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ops, time.Since(start)
}

// verify checks a history and the final state; it returns the checker's
// violations (the planted bug's test wants some, and needs no particular
// mix of tokens).
func verify(t *testing.T, name string, ops []nemesis.Op, end time.Duration, final nemesis.State, planted bool) []string {
	t.Helper()
	v := nemesis.CheckRegister(name, ops, end)
	var last nemesis.Op
	n := map[nemesis.Outcome]int{}
	equal := 0
	for _, o := range ops {
		n[o.Outcome]++
		if o.Outcome == nemesis.Accepted {
			if o.Token == o.Prev.Token {
				equal++
			}
			if o.Seq > last.Seq {
				last = o
			}
		}
	}
	if final != (nemesis.State{Token: last.Token, Value: last.Value}) {
		v = append(v, fmt.Sprintf("final state %+v, want the last accepted write %v", final, last))
	}
	if !planted && (equal == 0 || n[nemesis.Accepted] == equal || n[nemesis.Stale] == 0) {
		t.Errorf("the run did not mix equal (%d), newer (%d) and stale (%d) tokens", equal, n[nemesis.Accepted]-equal, n[nemesis.Stale])
	}
	t.Logf("%s: %d writes in %v by %d writers: %d accepted (%d with the stored token), %d stale; %d violations",
		name, len(ops), end.Round(time.Millisecond), *workers, n[nemesis.Accepted], equal, n[nemesis.Stale], len(v))
	return v
}

// doWrite writes value through Fence.Do: a put of the data key with its
// previous value, the fence's previous token, and the revision.
func doWrite(f *fenceetcd.Fence, data string) write {
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
	ops, end := run(t, "etcd-do", *runFor, doWrite(f, data))
	high, err := f.Highest(context.Background(), "reg")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range verify(t, "etcd-do", ops, end, nemesis.State{Token: high, Value: e.get(t, data)}, false) {
		t.Error(v)
	}
}

// TestConcurrentRegister: Register.Write.
func TestConcurrentRegister(t *testing.T) {
	e := newEnv(t)
	r, _ := fenceetcd.NewRegister(e.cli, e.prefix+"/reg")
	ops, end := run(t, "etcd-register", *runFor, func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		prev, rev, err := r.Write(ctx, tok, []byte(value))
		return nemesis.State{Token: prev.Token, Value: string(prev.Data)}, rev, err
	})
	v, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range verify(t, "etcd-register", ops, end, nemesis.State{Token: v.Token, Value: string(v.Data)}, false) {
		t.Error(v)
	}
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
	ops, end := run(t, "etcd-racy", *runFor/2, racy)
	high, _ := f.Highest(context.Background(), "reg")
	v := verify(t, "etcd-racy", ops, end, nemesis.State{Token: high, Value: e.get(t, data)}, true)
	if len(v) == 0 {
		t.Fatal("the checker found nothing wrong with a fence that compares outside the transaction")
	}
	t.Logf("first of %d violations: %s", len(v), v[0])
}
