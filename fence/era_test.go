package fence

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEraRanges: era g's tokens are g·2^48 + raw, in order,
// above every token of every earlier era (raw up to MaxRawToken),
// and the last era's still fit a signed 64-bit integer; a raw token
// or an era out of range is an error matching ErrTokenOverflow.
func TestEraRanges(t *testing.T) {
	for _, g := range []Era{0, 1, 2, 7, MaxEra} {
		lo, err := g.Token(1)
		if err != nil || lo != g.Floor()+1 {
			t.Fatalf("g%d.Token(1) = %v, %v; want %v", g, lo, err, g.Floor()+1)
		}
		hi, err := g.Token(MaxRawToken)
		if err != nil || hi <= lo || hi != g.Floor()+MaxRawToken {
			t.Fatalf("g%d.Token(max) = %v, %v", g, hi, err)
		}
		if EraOf(lo) != g || EraOf(hi) != g {
			t.Errorf("EraOf(%v), EraOf(%v) = %d, %d; want %d", lo, hi, EraOf(lo), EraOf(hi), g)
		}
		if g < MaxEra && hi >= (g+1).Floor() {
			t.Errorf("g%d's last token %v reaches g%d's floor %v", g, hi, g+1, (g + 1).Floor())
		}
		for _, raw := range []Token{MaxRawToken + 1, 1 << 63, math.MaxUint64} {
			if _, err := g.Token(raw); !errors.Is(err, ErrTokenOverflow) {
				t.Errorf("g%d.Token(%v) err = %v, want ErrTokenOverflow", g, raw, err)
			}
		}
		if _, err := g.Token(0); !errors.Is(err, ErrNoToken) {
			t.Errorf("g%d.Token(0) err = %v, want ErrNoToken", g, err)
		}
	}
	if last, _ := MaxEra.Token(MaxRawToken); last != math.MaxInt64 {
		t.Errorf("the last token is %v, want 2^63-1", last)
	}
	past := MaxEra + 1
	if _, err := past.Token(1); !errors.Is(err, ErrTokenOverflow) || past.Check() == nil {
		t.Errorf("era %d: Token err %v, Check %v; want ErrTokenOverflow", past, err, past.Check())
	}
	// A ZooKeeper czxid of epoch 65535 fits era 0's range; epoch 65536 does not.
	if _, err := Era(3).Token(65535<<32 | 0xffffffff); err != nil {
		t.Error(err)
	}
	if _, err := Era(3).Token(65536 << 32); !errors.Is(err, ErrTokenOverflow) {
		t.Errorf("epoch 65536: %v", err)
	}
}

// TestGuardRaiseFloor: after RaiseFloor every token below the floor is
// stale, the floor and above are accepted; a lower floor (or zero) never
// lowers the mark.
func TestGuardRaiseFloor(t *testing.T) {
	var g Guard
	if err := g.Check("r", 40); err != nil {
		t.Fatal(err)
	}
	floor := Era(1).Floor()
	if got, err := g.RaiseFloor("r", floor); err != nil || got != floor {
		t.Fatalf("RaiseFloor = %v, %v; want %v", got, err, floor)
	}
	var se *StaleError
	if err := g.Check("r", 41); !errors.As(err, &se) || se.Highest != floor {
		t.Fatalf("token 41 after the floor: %v", err)
	}
	if err := g.Check("r", floor-1); !errors.Is(err, ErrStale) {
		t.Fatalf("token floor-1: %v", err)
	}
	first, _ := Era(1).Token(1)
	if err := g.Check("r", first); err != nil {
		t.Fatalf("the new era's first token: %v", err)
	}
	for _, lower := range []Token{0, 5, floor} {
		if got, err := g.RaiseFloor("r", lower); err != nil || got != first {
			t.Errorf("RaiseFloor(%v) = %v, %v; want the mark %v kept", lower, got, err, first)
		}
	}
	if got, err := g.RaiseFloor("fresh", floor); err != nil || got != floor || g.Highest("fresh") != floor {
		t.Errorf("a resource never written: RaiseFloor = %v, %v, Highest = %v", got, err, g.Highest("fresh"))
	}
}

// TestTokenCeiling: every token up to MaxToken (2^63-1, the last era's
// last) is accepted by a Guard as a write, every floor up to MaxFloor (the
// last era's floor); a floor above MaxFloor (MaxToken itself, which locked
// the resource against every real grant) is refused with a *RangeError
// matching ErrTokenOverflow, and so are tokens above MaxToken, leaving the
// mark where it was, as every fence refuses them.
func TestTokenCeiling(t *testing.T) {
	last, _ := MaxEra.Token(MaxRawToken)
	if MaxToken != math.MaxInt64 || last != MaxToken || CheckToken(MaxToken) != nil {
		t.Fatalf("MaxToken = %v, the last era's last token %v, CheckToken %v", MaxToken, last, CheckToken(MaxToken))
	}
	if MaxFloor != MaxEra.Floor() || CheckFloor(MaxFloor) != nil {
		t.Fatalf("MaxFloor = %v, CheckFloor %v", MaxFloor, CheckFloor(MaxFloor))
	}
	var g Guard
	for _, fl := range []Token{MaxFloor + 1, MaxToken} {
		var re *RangeError
		if _, err := g.RaiseFloor("top", fl); !errors.As(err, &re) || !errors.Is(err, ErrTokenOverflow) || re.Floor != fl ||
			!strings.Contains(err.Error(), fl.String()) {
			t.Errorf("RaiseFloor(%v): %v; want a *RangeError", fl, err)
		}
	}
	if got, err := g.RaiseFloor("top", MaxFloor); err != nil || got != MaxFloor {
		t.Fatalf("RaiseFloor(MaxFloor) = %v, %v", got, err)
	}
	if err := g.Check("top", MaxToken); err != nil {
		t.Fatalf("a write of MaxToken after the last floor: %v", err)
	}
	for _, tok := range []Token{MaxToken + 1, 1<<63 + 5, math.MaxUint64} {
		var re *RangeError
		if _, err := g.RaiseFloor("r", tok); !errors.As(err, &re) || !errors.Is(err, ErrTokenOverflow) || re.Token != tok {
			t.Errorf("RaiseFloor(%v): %v; want a *RangeError", tok, err)
		}
		if err := g.Check("r", tok); !errors.Is(err, ErrTokenOverflow) {
			t.Errorf("a write of %v: %v; want ErrTokenOverflow", tok, err)
		}
		if err := CheckToken(tok); err == nil || !strings.Contains(err.Error(), tok.String()) {
			t.Errorf("CheckToken(%v) = %v", tok, err)
		}
	}
	if h := g.Highest("r"); h != 0 {
		t.Errorf("the refused tokens left the mark at %v", h)
	}
}

// TestBackendsDocShellEra runs the shell lines of docs/backends.md that move
// $ZKRECIPES_TOKEN into era 1, exactly as printed: they give Era(1).Token,
// and exit 70 for a token that does not fit.
func TestBackendsDocShellEra(t *testing.T) {
	doc, err := os.ReadFile("../docs/backends.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```sh\n   [ \"$ZKRECIPES_TOKEN\"")
	block, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("docs/backends.md has no ```sh block testing $ZKRECIPES_TOKEN")
	}
	script := "[ \"$ZKRECIPES_TOKEN\"" + block + "\necho \"$token\"\n"
	for _, raw := range []Token{1, 4294967346, MaxRawToken, MaxRawToken + 1} {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), "ZKRECIPES_TOKEN="+raw.String())
		out, err := cmd.Output()
		want, werr := Era(1).Token(raw)
		if werr != nil {
			if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 70 {
				t.Errorf("token %v: %v, %q; want exit 70", raw, err, out)
			}
			continue
		}
		if err != nil || strings.TrimSpace(string(out)) != want.String() {
			t.Errorf("token %v: %q, %v; want %v", raw, out, err, want)
		}
	}
}
