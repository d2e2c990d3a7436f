package fenceredis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
)

// TestDo: the first token, an equal one and a newer one are accepted with
// their writes; an older one is refused with the highest accepted, and
// none of its writes lands.
func TestDo(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	data, h, l := e.prefix+"data", e.prefix+"hash", e.prefix+"list"
	for _, c := range []struct {
		tok  fence.Token
		val  string
		prev fence.Token
	}{{7, "a", 0}, {7, "b", 7}, {9, "c", 7}} {
		prev, err := f.Do(ctx, "report", c.tok, fenceredis.Set(data, c.val), fenceredis.HSet(h, "v", c.val), fenceredis.RPush(l, c.val))
		if err != nil || prev != c.prev {
			t.Fatalf("Do(%v, %q) = %v, %v; want prev %v", c.tok, c.val, prev, err, c.prev)
		}
	}
	_, err := f.Do(ctx, "report", 8, fenceredis.Set(data, "late"), fenceredis.Del(h))
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Highest != 9 || se.Token != 8 || se.Resource != "report" {
		t.Fatalf("older token: %v; want a StaleError with highest 9", err)
	}
	if got := e.get(t, data); got != "c" {
		t.Fatalf("data after the stale write: %q", got)
	}
	if n, _ := e.cli.LLen(ctx, l).Result(); n != 3 {
		t.Fatalf("the list has %d items, want 3", n)
	}
	if high, err := f.Highest(ctx, "report"); high != 9 || err != nil {
		t.Fatalf("Highest = %v, %v", high, err)
	}
	// Every command, a TTL, and the largest token.
	ws := []fenceredis.Write{fenceredis.SetPX(data, "d", time.Minute), fenceredis.HDel(h, "v"), fenceredis.Del(l),
		fenceredis.SAdd(e.prefix+"set", "x", "y"), fenceredis.SRem(e.prefix+"set2", "x")}
	if _, err := f.Do(ctx, "report", fence.MaxToken, ws...); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := e.cli.PTTL(ctx, data).Result(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL %v", ttl)
	}
	want := []string{e.prefix + "data", e.prefix + "fence:report", e.prefix + "set"}
	if k := e.keys(t); strings.Join(k, " ") != strings.Join(want, " ") {
		t.Fatalf("keys %q, want %q", k, want)
	}
}

// TestBadInput: what Do refuses before sending anything, what the script
// refuses before writing anything, and that neither left a key.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	fencetest.RunBadCalls(t, bare(f))
	d := e.prefix + "d"
	for _, c := range []struct {
		name     string
		resource string
		tok      fence.Token
		writes   []fenceredis.Write
		want     error
	}{
		{"zero Write", "r", 5, []fenceredis.Write{{}}, fenceredis.ErrBadWrite},
		{"set of the fence key", "r", 5, []fenceredis.Write{fenceredis.Set(e.prefix+"fence:r", "99")}, fenceredis.ErrBadWrite},
		{"delete of another fence key", "r", 5, []fenceredis.Write{fenceredis.Del(e.prefix + "fence:x")}, fenceredis.ErrBadWrite},
		{"a key written twice", "r", 5, []fenceredis.Write{fenceredis.Set(d, "1"), fenceredis.Del(d)}, fenceredis.ErrBadWrite},
		{"empty key", "r", 5, []fenceredis.Write{fenceredis.Set("", "1")}, fenceredis.ErrBadWrite},
		{"odd field list", "r", 5, []fenceredis.Write{fenceredis.HSet(d, "f")}, fenceredis.ErrBadWrite},
		{"no members", "r", 5, []fenceredis.Write{fenceredis.SAdd(d)}, fenceredis.ErrBadWrite},
		{"zero TTL", "r", 5, []fenceredis.Write{fenceredis.SetPX(d, "v", 0)}, fenceredis.ErrBadWrite},
		{"TTL too long", "r", 5, []fenceredis.Write{fenceredis.SetPX(d, "v", fenceredis.MaxTTL+time.Hour)}, fenceredis.ErrBadWrite},
		{"too many values", "r", 5, []fenceredis.Write{fenceredis.RPush(d, make([]string, fenceredis.MaxWriteArgs+1)...)}, fenceredis.ErrBadWrite},
	} {
		if _, err := f.Do(ctx, c.resource, c.tok, c.writes...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if k := e.keys(t); len(k) != 0 {
		t.Fatalf("refused calls left keys: %q", k)
	}
	// A write the key's type would make fail: the script refuses it
	// before writing anything, the set before it included.
	if err := e.cli.Set(ctx, d, "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := f.Do(ctx, "r", 5, fenceredis.Set(e.prefix+"first", "1"), fenceredis.HSet(d, "f", "v"))
	if !errors.Is(err, fenceredis.ErrWrongType) || errors.Is(err, fence.ErrUncertain) {
		t.Fatalf("HSET of a string: %v", err)
	}
	if k := e.keys(t); len(k) != 1 || k[0] != d {
		t.Fatalf("the refused script left keys: %q", k)
	}
	// Hostile bytes are data: a value that is Lua, a key with a newline.
	lua := "')) redis.call('FLUSHALL') --"
	if _, err := f.Do(ctx, "r\n"+lua, 5, fenceredis.Set(e.prefix+"k\n"+lua, lua)); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, e.prefix+"k\n"+lua); got != lua || len(e.keys(t)) != 3 {
		t.Fatalf("hostile value: %q, keys %q", got, e.keys(t))
	}
	if _, err := fenceredis.New(e.cli, ""); !errors.Is(err, fenceredis.ErrBadPrefix) {
		t.Fatalf("empty prefix: %v", err)
	}
	retrying := redis.NewClient(&redis.Options{Addr: e.srv.Addr()})
	defer retrying.Close()
	if _, err := fenceredis.New(retrying, "p:"); !errors.Is(err, fenceredis.ErrRetries) {
		t.Fatalf("a client that retries: %v", err)
	}
	if _, err := fenceredis.NewRegister(retrying, "p:r"); !errors.Is(err, fenceredis.ErrRetries) {
		t.Fatalf("a register's client that retries: %v", err)
	}
}

// TestNotFence: a fence key holding another type or a value that is not a
// token is reported, not overwritten.
func TestNotFence(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	ctx := context.Background()
	e.cli.Set(ctx, e.prefix+"fence:s", "hello", 0)
	e.cli.Set(ctx, e.prefix+"fence:z", "007", 0)
	e.cli.RPush(ctx, e.prefix+"fence:l", "x")
	e.cli.Set(ctx, e.prefix+"fence:big", "9223372036854775808", 0) // MaxToken+1: would refuse every token
	for _, r := range []string{"s", "z", "l", "big"} {
		if _, err := f.Do(ctx, r, 5, fenceredis.Set(e.prefix+"d", "v")); !errors.Is(err, fenceredis.ErrNotFence) {
			t.Errorf("Do over %s: %v", r, err)
		}
		if _, err := f.Highest(ctx, r); !errors.Is(err, fenceredis.ErrNotFence) {
			t.Errorf("Highest of %s: %v", r, err)
		}
		if _, err := f.RaiseFloor(ctx, r, 9); !errors.Is(err, fenceredis.ErrNotFence) {
			t.Errorf("RaiseFloor of %s: %v", r, err)
		}
	}
	if e.get(t, e.prefix+"fence:s") != "hello" || e.get(t, e.prefix+"d") != "<absent>" {
		t.Fatal("a refused call wrote")
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
	reg := fencetest.PerResource(t, func(resource string) (*fenceredis.Register, error) {
		return fenceredis.NewRegister(e.cli, e.prefix+"reg:"+resource)
	})
	fencetest.RunFloorCeiling(t, func(ctx context.Context, resource string, floor fence.Token) (fence.Token, error) {
		return reg(resource).RaiseFloor(ctx, floor)
	}, func(ctx context.Context, resource string, tok fence.Token) error {
		_, err := reg(resource).Write(ctx, tok, []byte("v"))
		return err
	})
}

// bare is f.Do with no writes: a call that only records the token.
func bare(f *fenceredis.Fence) func(ctx context.Context, resource string, tok fence.Token) error {
	return func(ctx context.Context, resource string, tok fence.Token) error {
		_, err := f.Do(ctx, resource, tok)
		return err
	}
}

// TestUncertain: fencetest's lost-answer scenario (the connection breaks
// after Redis ran the script and before its answer arrived), and a dial
// that fails is certain.
func TestUncertain(t *testing.T) {
	e := newEnv(t)
	cli, p := e.proxied(t)
	f, _ := fenceredis.New(cli, e.prefix+"fence:")
	ctx := context.Background()
	data := e.prefix + "data"
	do := func(ctx context.Context, tok fence.Token, v string) error {
		var ws []fenceredis.Write
		if v != "" {
			ws = append(ws, fenceredis.Set(data, v))
		}
		_, err := f.Do(ctx, "r", tok, ws...)
		return err
	}
	fencetest.RunUncertain(t, p, do, func() string { return e.get(t, data) })
	// No server at the address: the dial fails, nothing was sent.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	gone, _ := fenceredis.New(client(t, l.Addr().String()), "p:")
	if _, err := gone.Do(ctx, "r", 5); err == nil || errors.Is(err, fence.ErrUncertain) {
		t.Fatalf("no server: %v, want a certain failure", err)
	}
}
