package fence

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range []Token{1, 42, 1<<63 + 5} {
		back, err := ParseToken(tok.String())
		if err != nil || back != tok {
			t.Fatalf("ParseToken(%q) = %v, %v", tok.String(), back, err)
		}
	}
	for _, s := range []string{"", "0", "-1", "+1", "x", "18446744073709551616", " 1", "0007"} {
		if _, err := ParseToken(s); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q) err = %v, want ErrBadToken", s, err)
		}
	}
	if !Token(0).IsZero() || Token(1).IsZero() {
		t.Fatal("IsZero")
	}
}

// TestGuardRejectsStale is the 33/34 scenario: holder 33 pauses, holder 34
// writes, 33 resumes and its write must not land.
func TestGuardRejectsStale(t *testing.T) {
	var g Guard
	var stale []*StaleError
	g.OnStale = func(e *StaleError) { stale = append(stale, e) }
	value := ""
	write := func(v string) func() error { return func() error { value = v; return nil } }
	if err := g.Do("r", 34, write("b")); err != nil {
		t.Fatal(err)
	}
	err := g.Do("r", 33, write("a"))
	var se *StaleError
	if !errors.Is(err, ErrStale) || !errors.As(err, &se) || se.Token != 33 || se.Highest != 34 {
		t.Fatalf("stale write: err = %v", err)
	}
	if value != "b" || len(stale) != 1 {
		t.Fatalf("value = %q, stale callbacks %d", value, len(stale))
	}
	if err := g.Do("r", 34, write("c")); err != nil || value != "c" {
		t.Fatalf("equal token must be accepted: %v", err)
	}
	if err := g.Do("other", 1, write("d")); err != nil {
		t.Fatalf("resources are independent: %v", err)
	}
	if err := g.Do("r", 0, write("e")); !errors.Is(err, ErrNoToken) {
		t.Fatalf("zero token: %v", err)
	}
	if err := g.Do("r", 40, func() error { return errors.New("boom") }); err == nil || g.Highest("r") != 34 {
		t.Fatalf("a failed write must not raise the mark: %v %v", err, g.Highest("r"))
	}
	if err := g.Check("r", 35); err != nil || g.Highest("r") != 35 {
		t.Fatal("Check must record")
	}
	func() {
		defer func() { recover() }()
		g.Do("r", 36, func() error { panic("write failed") })
	}()
	if err := g.Check("r", 37); err != nil || g.Highest("r") != 37 {
		t.Fatalf("a panicking write wedged the guard or raised the mark: %v %v", err, g.Highest("r"))
	}
}

func TestGuardConcurrent(t *testing.T) {
	var g Guard
	var wg sync.WaitGroup
	applied := 0
	for i := 1; i <= 64; i++ {
		wg.Add(1)
		go func(tok Token) {
			defer wg.Done()
			_ = g.Do("r", tok, func() error { applied++; return nil }) // serialized by the guard
		}(Token(i))
	}
	wg.Wait()
	if g.Highest("r") != 64 || applied < 1 {
		t.Fatalf("highest %v applied %d", g.Highest("r"), applied)
	}
}

// TestGuardDoNilWrite: a nil write is Check (a new user's trial: Do
// dereferenced it, while Admit accepts nil).
func TestGuardDoNilWrite(t *testing.T) {
	var g Guard
	if err := g.Do("r", 5, nil); err != nil {
		t.Fatal(err)
	}
	if h := g.Highest("r"); h != 5 {
		t.Fatalf("Highest = %v, want 5", h)
	}
	var stale *StaleError
	if err := g.Do("r", 4, nil); !errors.As(err, &stale) {
		t.Fatalf("Do(4, nil) = %v, want a *StaleError", err)
	}
}

// TestOnStaleNotForTheWritesRefusals: a write refused by another fence
// (wrapped or not) is that fence's refusal: with one OnStale on both
// Guards, one refusal is reported once.
func TestOnStaleNotForTheWritesRefusals(t *testing.T) {
	n := 0
	count := func(*StaleError) { n++ }
	outer, inner := &Guard{OnStale: count}, &Guard{OnStale: count}
	if err := inner.Check("in", 9); err != nil {
		t.Fatal(err)
	}
	for _, wrap := range []bool{false, true} {
		n = 0
		err := outer.Do("out", 5, func() error {
			err := inner.Do("in", 3, nil)
			if wrap && err != nil {
				return fmt.Errorf("downstream: %w", err)
			}
			return err
		})
		if !errors.Is(err, ErrStale) || n != 1 {
			t.Fatalf("wrapped %v: %v, reported %d times, want once", wrap, err, n)
		}
	}
}
