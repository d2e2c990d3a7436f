package life

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCloseWaits: Close ends Context and bound contexts with
// ErrSessionClosed, refuses new work, and Wait returns only after running
// goroutines and counted operations end.
func TestCloseWaits(t *testing.T) {
	g := New()
	var ran atomic.Bool
	if !g.Go(func() { <-g.Context().Done(); time.Sleep(20 * time.Millisecond); ran.Store(true) }) || !g.Enter() {
		t.Fatal("open group refused work")
	}
	bound, cancel := g.Bind(context.Background())
	defer cancel()
	if !g.Close() || g.Close() || !g.Closed() {
		t.Fatal("Close did not report the first close only")
	}
	if g.Go(func() {}) || g.Enter() {
		t.Fatal("closed group took work")
	}
	<-bound.Done()
	if !errors.Is(context.Cause(bound), recipe.ErrSessionClosed) {
		t.Fatalf("bound cause %v", context.Cause(bound))
	}
	g.Exit()
	g.Wait()
	if !ran.Load() {
		t.Fatal("Wait returned before the goroutine ended")
	}
}
