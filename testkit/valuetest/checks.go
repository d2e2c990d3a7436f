package valuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/counter"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// absent: a value never written reads as missing.
func (s *suite) absent(t *testing.T) {
	c := s.h.NewClient(t, "absent")
	x := get(t, c, "A")
	if x.Version != 0 || x.Data != nil || x.Rev < 0 {
		t.Errorf("Get of a value never written = %s, want Version 0, nil Data, Rev >= 0", show(x))
	}
}

// createOnce: TrySet(0) creates, once.
func (s *suite) createOnce(t *testing.T) {
	a, b := s.h.NewClient(t, "create-once"), s.h.NewClient(t, "create-once")
	x := trySet(t, a, "A", 0, []byte("a"))
	if x.Version <= 0 || !bytes.Equal(x.Data, []byte("a")) {
		t.Errorf("A: TrySet(0, a) = %s, want a positive Version and the data", show(x))
	}
	if got := get(t, b, "B"); !same(got, x) {
		t.Errorf("B: Get after A's create = %s, want %s", show(got), show(x))
	}
	if y, err := b.TrySet(stepCtx(t), 0, []byte("b")); !errors.Is(err, recipe.ErrConflict) {
		t.Errorf("B: second TrySet(0, b) = %s, %v; want an error matching recipe.ErrConflict", show(y), err)
	}
	if got := get(t, a, "A"); !same(got, x) {
		t.Errorf("A: Get after B's refused create = %s, want A's %s unchanged", show(got), show(x))
	}
}

// staleVersionConflicts: only the current version writes.
func (s *suite) staleVersionConflicts(t *testing.T) {
	a, b := s.h.NewClient(t, "stale"), s.h.NewClient(t, "stale")
	v1 := trySet(t, a, "A", 0, []byte("one"))
	v2 := trySet(t, b, "B", v1.Version, []byte("two"))
	if v2.Version <= v1.Version || v2.Rev <= v1.Rev {
		t.Errorf("B: TrySet over %s = %s, want a larger Version and Rev", show(v1), show(v2))
	}
	for _, stale := range []int64{0, v1.Version, v2.Version + 1000} {
		if y, err := a.TrySet(stepCtx(t), stale, []byte("three")); !errors.Is(err, recipe.ErrConflict) {
			t.Errorf("A: TrySet(%d) with the value at %s = %s, %v; want an error matching recipe.ErrConflict", stale, show(v2), show(y), err)
		}
	}
	if got := get(t, a, "A"); !same(got, v2) {
		t.Errorf("A: Get after the refused writes = %s, want %s unchanged", show(got), show(v2))
	}
}

// concurrentAdds: no increment of a counter over the value is lost.
func (s *suite) concurrentAdds(t *testing.T) {
	const clients, adds = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := counter.New(s.h.NewClient(t, "adds"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 4*OpTimeout)
			defer cancel()
			for j := range adds {
				if _, err := c.Add(ctx, 1); err != nil {
					errs <- fmt.Errorf("client %d: add %d: %w", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n, err := counter.New(s.h.NewClient(t, "adds")).Get(stepCtx(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if n != clients*adds {
		t.Errorf("count after %d clients added 1 %d times each = %d, want %d", clients, adds, n, clients*adds)
	}
}

// tooLarge: data over the backend's limit is refused, unsent.
func (s *suite) tooLarge(t *testing.T) {
	c := s.h.NewClient(t, "too-large")
	big := make([]byte, s.h.TooLarge())
	if x, err := c.TrySet(stepCtx(t), 0, big); !errors.Is(err, recipe.ErrTooLarge) {
		t.Errorf("TrySet(0, %d bytes) = %s, %v; want an error matching recipe.ErrTooLarge", len(big), show(x), err)
	}
	if got := get(t, c, "A"); got.Version != 0 {
		t.Errorf("Get after the refused write = %s, want the value missing", show(got))
	}
}

// lostReplySettled: a write whose connection is cut is applied once.
func (s *suite) lostReplySettled(t *testing.T) {
	c := s.h.NewClient(t, "lost-reply")
	cut, ok := c.(Cutter)
	if !ok {
		t.Skip("the harness's clients cannot cut their connection (no Cutter)")
	}
	other := s.h.NewClient(t, "lost-reply")
	var prev recipe.Versioned
	for i, sent := range []bool{true, false, true, false} {
		data := fmt.Appendf(nil, "write-%d", i)
		cut.CutNextWrite(sent)
		x, err := c.TrySet(stepCtx(t), prev.Version, data)
		if err != nil {
			t.Fatalf("TrySet(%d, %s) with its connection cut (request sent: %t): %v; want it settled as applied", prev.Version, data, sent, err)
		}
		if x.Version <= prev.Version || !bytes.Equal(x.Data, data) {
			t.Errorf("TrySet(%d, %s) with its connection cut (request sent: %t) = %s, want the data at a larger Version", prev.Version, data, sent, show(x))
		}
		if got := get(t, other, "B"); got.Version != x.Version || !bytes.Equal(got.Data, data) {
			t.Errorf("B: Get after the cut write = %s, want %s", show(got), show(x))
		}
		if y, err := other.TrySet(stepCtx(t), prev.Version, []byte("stale")); !errors.Is(err, recipe.ErrConflict) {
			t.Errorf("B: TrySet(%d) after the cut write = %s, %v; want an error matching recipe.ErrConflict", prev.Version, show(y), err)
		}
		prev = x
	}
}

// get reads c's value, failing the test on an error.
func get(t *testing.T, c Client, who string) recipe.Versioned {
	t.Helper()
	x, err := c.Get(stepCtx(t))
	if err != nil {
		t.Fatalf("%s: Get: %v", who, err)
	}
	return x
}

// trySet writes through c, failing the test on an error.
func trySet(t *testing.T, c Client, who string, expected int64, data []byte) recipe.Versioned {
	t.Helper()
	x, err := c.TrySet(stepCtx(t), expected, data)
	if err != nil {
		t.Fatalf("%s: TrySet(%d, %q): %v", who, expected, data, err)
	}
	return x
}

// same reports whether a and b show the same write (or both no value).
func same(a, b recipe.Versioned) bool {
	return a.Version == b.Version && bytes.Equal(a.Data, b.Data) && (a.Version == 0 || a.Rev == b.Rev)
}

// show formats a value for messages.
func show(x recipe.Versioned) string {
	if x.Version == 0 && x.Data == nil {
		return fmt.Sprintf("missing@rev %d", x.Rev)
	}
	d := x.Data
	if len(d) > 24 {
		return fmt.Sprintf("%q…(%d bytes)@v%d/rev %d", d[:24], len(d), x.Version, x.Rev)
	}
	return fmt.Sprintf("%q@v%d/rev %d", d, x.Version, x.Rev)
}
