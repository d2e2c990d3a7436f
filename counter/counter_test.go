package counter_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/counter"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/value"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestDecode: the encoding is read exactly, with or without a tag; a
// missing value counts 0.
func TestDecode(t *testing.T) {
	for _, c := range []struct {
		data string
		n    int64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true},
		{"9223372036854775807", math.MaxInt64, true}, {"-9223372036854775808", math.MinInt64, true},
		{"42\n0123456789abcdef", 42, true}, {"-7\nffffffffffffffff", -7, true}, {"0\n0000000000000000", 0, true},
		{"-9223372036854775808\n00000000000000a0", math.MinInt64, true},
		{"", 0, false}, {"+1", 0, false}, {"007", 0, false}, {"-0", 0, false}, {" 1", 0, false},
		{"1\n", 1, true}, {"9223372036854775808", 0, false}, {"\x00\x00\x00\x01", 0, false},
		{"1\n0123456789ABCDEF", 0, false}, {"1\n0123456789abcde", 0, false}, {"1\n0123456789abcdef0", 0, false},
		{"1\n0123456789abcdef\n", 0, false}, {"1\n\n123456789abcdef", 0, false}, {"\n0123456789abcdef", 0, false},
		{"007\n0123456789abcdef", 0, false}, {"1\r\n0123456789abcdef", 0, false}, {"1 0123456789abcdef", 0, false},
		{"1\n0x23456789abcdef", 0, false}, {"1\n-123456789abcdef", 0, false},
	} {
		got, err := counter.Decode(recipe.Versioned{Data: []byte(c.data), Version: 3, Rev: 9})
		switch {
		case c.ok && (err != nil || got != counter.Count{N: c.n, Version: 3, Rev: 9}):
			t.Errorf("Decode(%q) = %+v, %v; want %d", c.data, got, err, c.n)
		case !c.ok && !errors.Is(err, counter.ErrNotCounter):
			t.Errorf("Decode(%q) = %+v, %v; want ErrNotCounter", c.data, got, err)
		}
		if c.ok && !strings.Contains(c.data, "\n") && string(counter.Encode(c.n)) != c.data {
			t.Errorf("Encode(%d) = %q, want %q", c.n, counter.Encode(c.n), c.data)
		}
	}
	if got, err := counter.Decode(recipe.Versioned{Rev: 5}); err != nil || got != (counter.Count{Rev: 5}) {
		t.Errorf("Decode(missing) = %+v, %v; want 0", got, err)
	}
	for _, c := range []struct {
		n    int64
		tag  uint64
		want string
	}{
		{0, 0, "0\n0000000000000000"}, {42, 0x0123456789abcdef, "42\n0123456789abcdef"},
		{math.MinInt64, math.MaxUint64, "-9223372036854775808\nffffffffffffffff"}, {-7, 0xa0, "-7\n00000000000000a0"},
	} {
		b := counter.EncodeTagged(c.n, c.tag)
		if string(b) != c.want {
			t.Errorf("EncodeTagged(%d, %#x) = %q, want %q", c.n, c.tag, b, c.want)
		}
		if got, err := counter.Decode(recipe.Versioned{Data: b, Version: 1}); err != nil || got.N != c.n {
			t.Errorf("Decode(EncodeTagged(%d, %#x)) = %+v, %v", c.n, c.tag, got, err)
		}
	}
}

// TestAddOnZooKeeper: Add from a missing value, negative deltas, the
// overflow refused, foreign data refused and left alone.
func TestAddOnZooKeeper(t *testing.T) {
	cl := zktest.Shared(t)
	v, err := value.New(rtest.Connect(t, cl), "/counters/c")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := counter.New(v)
	if n, err := c.Get(ctx); err != nil || n != 0 {
		t.Fatalf("Get of a missing value = %d, %v; want 0", n, err)
	}
	for _, step := range []struct{ delta, want int64 }{{5, 5}, {-8, -3}, {0, -3}, {math.MaxInt64, math.MaxInt64 - 3}} {
		if n, err := c.Add(ctx, step.delta); err != nil || n != step.want {
			t.Fatalf("Add(%d) = %d, %v; want %d", step.delta, n, err, step.want)
		}
	}
	if _, err := c.Add(ctx, 4); !errors.Is(err, counter.ErrOverflow) {
		t.Errorf("Add past MaxInt64: %v, want ErrOverflow", err)
	}
	cur, err := c.Read(ctx)
	if err != nil || cur.N != math.MaxInt64-3 {
		t.Fatalf("Read = %+v, %v", cur, err)
	}
	if _, err := c.TrySet(ctx, cur.Version-1, 1); !errors.Is(err, recipe.ErrConflict) {
		t.Errorf("TrySet with a stale version: %v, want recipe.ErrConflict", err)
	}
	// A count written by hand, without a tag, is read; every write of the
	// counter has a tag of its own.
	if _, err := v.TrySet(ctx, cur.Version, counter.Encode(41)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Add(ctx, 1); err != nil || n != 42 {
		t.Fatalf("Add(1) over a hand-written 41 = %d, %v; want 42", n, err)
	}
	at, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 3 {
		w, err := c.TrySet(ctx, at.Version, 42)
		if err != nil {
			t.Fatalf("TrySet(%d, 42) #%d: %v", at.Version, i, err)
		}
		raw, err := v.Get(ctx)
		if err != nil || raw.Version != w.Version {
			t.Fatalf("Get after TrySet = %+v, %v; want version %d", raw, err, w.Version)
		}
		if got, err := counter.Decode(raw); err != nil || got.N != 42 || len(raw.Data) != len("42\n")+16 || seen[string(raw.Data)] {
			t.Errorf("TrySet(42) #%d wrote %q (%+v, %v); want 42 with a tag of its own", i, raw.Data, got, err)
		}
		seen[string(raw.Data)] = true
		at = w
	}
	x, err := v.TrySet(ctx, at.Version, []byte{0, 0, 0, 1}) // Curator's SharedCount encoding
	if err != nil {
		t.Fatal(err)
	}
	var pe *counter.ParseError
	if _, err := c.Add(ctx, 1); !errors.As(err, &pe) || !errors.Is(err, counter.ErrNotCounter) || pe.Version != x.Version {
		t.Errorf("Add over foreign data: %v, want a *ParseError at version %d", err, x.Version)
	}
	if y, err := v.Get(ctx); err != nil || y.Version != x.Version {
		t.Errorf("the foreign data was written over: %+v, %v", y, err)
	}
	if _, err := counter.New(nil).Get(ctx); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("Get of a Counter without a Value: %v, want recipe.ErrBadOption", err)
	}
}

// TestAddBoundedByCtx: Add stops at ctx's end with its cause.
func TestAddBoundedByCtx(t *testing.T) {
	cl := zktest.Shared(t)
	v, err := value.New(rtest.Connect(t, cl), "/counters/ctx")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := counter.New(v).Add(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Add with a done ctx: %v, want context.Canceled", err)
	}
}

// TestLostReplyOnTheLosingWrite: two counters on one value add 1 in
// lock-step from the same count, and the reply to the write of the one
// that loses the race is lost (the connection is cut right after its
// request is sent). Settling it must not take the winner's write for its
// own: the loser adds again, and the count is the number of Adds that
// succeeded. Round 0 races two creates of the missing value, the others
// two setData over the same version.
func TestLostReplyOnTheLosingWrite(t *testing.T) {
	cl := zktest.Shared(t)
	const path = "/counters/lost-reply"
	// before, once armed, runs on a's next create or setData before it is
	// sent; the request is then sent and the connection cut.
	var before atomic.Pointer[func()]
	hook := func(op int32) zktest.Fault {
		if op != zktest.OpCreate && op != zktest.OpSetData {
			return zktest.Pass
		}
		f := before.Swap(nil)
		if f == nil {
			return zktest.Pass
		}
		(*f)()
		return zktest.SendAndCut
	}
	quiet := zookeeper.WithLogger(slog.New(slog.DiscardHandler)) // the cuts' SUSPENDED warnings
	va, err := value.New(rtest.Connect(t, cl, zookeeper.WithDialer(zktest.RequestHook(nil, hook)), quiet), path)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := value.New(rtest.Connect(t, cl), path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := counter.New(va), counter.New(vb)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var adds int64
	for round := range 2 {
		// b's whole Add runs between a's read and a's write: b wins the
		// race, a's write is refused and its reply lost.
		var nb int64
		var errB error
		done := make(chan struct{})
		f := func() {
			defer close(done)
			nb, errB = b.Add(ctx, 1)
		}
		before.Store(&f)
		na, errA := a.Add(ctx, 1)
		if before.Load() != nil {
			t.Fatalf("round %d: a's Add = %d, %v without a write", round, na, errA)
		}
		<-done
		if errB != nil {
			t.Fatalf("round %d: b's Add (the winner): %v", round, errB)
		}
		adds++
		if errA != nil {
			t.Fatalf("round %d: a's Add (the loser, reply lost): %v", round, errA)
		}
		adds++
		if nb != adds-1 || na != adds {
			t.Errorf("round %d: b's Add = %d, a's = %d; want %d then %d", round, nb, na, adds-1, adds)
		}
		n, err := b.Get(ctx)
		if err != nil {
			t.Fatalf("round %d: Get: %v", round, err)
		}
		if n != adds {
			t.Errorf("round %d: count %d after %d Adds of 1 that succeeded", round, n, adds)
			adds = n // so that the next round is checked on its own
		}
	}
}
