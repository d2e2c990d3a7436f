package counter_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/counter"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/value"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestDecode: the encoding is read exactly; a missing value counts 0.
func TestDecode(t *testing.T) {
	for _, c := range []struct {
		data string
		n    int64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true},
		{"9223372036854775807", math.MaxInt64, true}, {"-9223372036854775808", math.MinInt64, true},
		{"", 0, false}, {"+1", 0, false}, {"007", 0, false}, {"-0", 0, false}, {" 1", 0, false},
		{"1\n", 0, false}, {"9223372036854775808", 0, false}, {"\x00\x00\x00\x01", 0, false},
	} {
		got, err := counter.Decode(recipe.Versioned{Data: []byte(c.data), Version: 3, Rev: 9})
		switch {
		case c.ok && (err != nil || got != counter.Count{N: c.n, Version: 3, Rev: 9}):
			t.Errorf("Decode(%q) = %+v, %v; want %d", c.data, got, err, c.n)
		case !c.ok && !errors.Is(err, counter.ErrNotCounter):
			t.Errorf("Decode(%q) = %+v, %v; want ErrNotCounter", c.data, got, err)
		}
		if c.ok && string(counter.Encode(c.n)) != c.data {
			t.Errorf("Encode(%d) = %q, want %q", c.n, counter.Encode(c.n), c.data)
		}
	}
	if got, err := counter.Decode(recipe.Versioned{Rev: 5}); err != nil || got != (counter.Count{Rev: 5}) {
		t.Errorf("Decode(missing) = %+v, %v; want 0", got, err)
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
	x, err := v.TrySet(ctx, cur.Version, []byte{0, 0, 0, 1}) // Curator's SharedCount encoding
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
