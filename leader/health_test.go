package leader_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestHealthBadInput: a negative tolerance is recipe.ErrBadOption; a nil
// *Health is healthy and tracks nothing, and so does Track of a nil lease
// (its done may be called twice).
func TestHealthBadInput(t *testing.T) {
	if _, err := leader.NewHealth(-1); !errors.Is(err, recipe.ErrBadOption) {
		t.Fatalf("NewHealth(-1): %v", err)
	}
	var none *leader.Health
	none.Track(nil)()
	if err := none.Check(); err != nil {
		t.Fatal(err)
	}
	h, err := leader.NewHealth(0)
	if err != nil || h.Tolerance() != leader.DefaultTolerance {
		t.Fatalf("NewHealth(0): %v, %v", h.Tolerance(), err)
	}
	done := h.Track(nil)
	done()
	done()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}
