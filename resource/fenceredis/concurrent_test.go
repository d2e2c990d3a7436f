package fenceredis_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis/fencerace"
)

var (
	runFor  = flag.Duration("fenceredis.duration", 700*time.Millisecond, "length of each concurrent run")
	workers = flag.Int("fenceredis.workers", 8, "concurrent writers")
)

// The concurrent runs are fencerace.Run and Verify (the register check of
// fencesql's runs) over this backend's writes.

// cfg is the shape of the run of the register called name.
func cfg(name string, d time.Duration) fencerace.Config {
	return fencerace.Config{Register: name, Workers: *workers, For: d, Seed: 25}
}

// logged is the order of application of a run through Do: each accepted
// call pushes "token value" to a list in its script, so the list gives
// each accepted write the state it overwrote and its place. It returns
// where the log and the calls' answers disagree.
func logged(t *testing.T, e *env, ops []nemesis.Op, log string) (bad []string) {
	t.Helper()
	entries, err := e.cli.LRange(context.Background(), log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	type place struct {
		seq  int64
		prev nemesis.State
	}
	at := map[string]place{}
	var prev nemesis.State
	for i, s := range entries {
		tok, value, _ := strings.Cut(s, " ")
		n, _ := strconv.ParseUint(tok, 10, 64)
		at[value] = place{int64(i + 1), prev}
		prev = nemesis.State{Token: fence.Token(n), Value: value}
	}
	accepted := 0
	for i, o := range ops {
		p, ok := at[o.Value]
		if o.Outcome != nemesis.Accepted {
			if ok {
				bad = append(bad, fmt.Sprintf("the write of refused call %v is in the log", o))
			}
			continue
		}
		accepted++
		if !ok || p.prev.Token != o.Prev.Token {
			bad = append(bad, fmt.Sprintf("accepted call %v: log entry %+v (found: %v); Do said the previous token was %v", o, p, ok, o.Prev.Token))
		}
		ops[i].Prev, ops[i].Seq = p.prev, p.seq
	}
	if accepted != len(entries) {
		bad = append(bad, fmt.Sprintf("%d writes in the log, %d accepted", len(entries), accepted))
	}
	return bad
}

// TestConcurrentDo: Fence.Do with a set of the caller's data key and a
// push to the log.
func TestConcurrentDo(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	data, log := e.prefix+"data", e.prefix+"log"
	ops, end := fencerace.Run(t, cfg("redis-do", *runFor), func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		prev, err := f.Do(ctx, "reg", tok, fenceredis.Set(data, value), fenceredis.RPush(log, tok.String()+" "+value))
		return nemesis.State{Token: prev}, 0, err
	})
	for _, b := range logged(t, e, ops, log) {
		t.Error(b)
	}
	high, err := f.Highest(context.Background(), "reg")
	if err != nil {
		t.Fatal(err)
	}
	fencerace.Check(t, cfg("redis-do", 0), ops, end, nemesis.State{Token: high, Value: e.get(t, data)})
}

// TestConcurrentRegister: Register.Write; the version gives the order.
func TestConcurrentRegister(t *testing.T) {
	e := newEnv(t)
	r, _ := fenceredis.NewRegister(e.cli, e.prefix+"reg")
	ops, end := fencerace.Run(t, cfg("redis-register", *runFor), func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		prev, err := r.Write(ctx, tok, []byte(value))
		return nemesis.State{Token: prev.Token, Value: string(prev.Data)}, prev.Version + 1, err
	})
	v, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fencerace.Check(t, cfg("redis-register", 0), ops, end, nemesis.State{Token: v.Token, Value: string(v.Data)})
}

// TestConcurrentCheckCatchesRacyFence plants the bug the script exists to
// prevent: the token is read and compared in the client, then written with
// the data in a MULTI/EXEC that no longer compares. The same run and
// checker must find violations, or the check above proves nothing.
func TestConcurrentCheckCatchesRacyFence(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	fk, _ := f.Key("reg")
	data, log := e.prefix+"data", e.prefix+"log"
	racy := func(ctx context.Context, tok fence.Token, value string) (nemesis.State, int64, error) {
		high, err := f.Highest(ctx, "reg")
		if err != nil {
			return nemesis.State{}, 0, err
		}
		if tok < high {
			return nemesis.State{}, 0, &fence.StaleError{Resource: "reg", Token: tok, Highest: high}
		}
		time.Sleep(time.Millisecond) // the window a paused client has
		_, err = e.cli.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, fk, tok.String(), 0)
			p.Set(ctx, data, value, 0)
			p.RPush(ctx, log, tok.String()+" "+value)
			return nil
		})
		return nemesis.State{Token: high}, 0, err
	}
	ops, end := fencerace.Run(t, cfg("redis-racy", *runFor/2), racy)
	high, _ := f.Highest(context.Background(), "reg")
	errs := logged(t, e, ops, log)
	v := fencerace.Verify(t, cfg("redis-racy", 0), ops, end, nemesis.State{Token: high, Value: e.get(t, data)}, true)
	if len(v) == 0 {
		t.Fatal("the checker found nothing wrong with a fence that compares outside the script")
	}
	t.Logf("first of %d violations: %s (and %d disagreements with the log)", len(v), v[0], len(errs))
}
