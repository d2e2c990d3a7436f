package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestStoredLimitNotOnAContainer: a directory first used by a plain
// semaphore is a container, which the server removes, data and all, once
// empty. While it is in use, SetSemaphoreLimit and a StoredLimit contender
// are refused (ErrBadLimit) and nothing is stored; once it is unused, the
// limit is stored on a persistent directory, which outlives the server's
// container sweep, and a contender with another n is refused.
func TestStoredLimitNotOnAContainer(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const dir = "/stored/container"
	plain, err := mutex.NewSemaphore(rtest.Connect(t, cl), dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	l, err := plain.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := mutex.SetSemaphoreLimit(ctx, rtest.Connect(t, cl), dir, 3); !errors.Is(err, mutex.ErrBadLimit) || !recipe.Permanent(err) {
		t.Fatalf("SetSemaphoreLimit on a container in use: %v, want ErrBadLimit", err)
	}
	if _, err := storedSem(t, rtest.Connect(t, cl), dir, 3).Acquire(ctx); !errors.Is(err, mutex.ErrBadLimit) {
		t.Fatalf("a StoredLimit Acquire on a container in use: %v, want ErrBadLimit", err)
	}
	if d := dirData(t, in, cl, dir); d != "" {
		t.Fatalf("stored %q on the container", d)
	}
	release(t, l)
	m, err := mutex.New(rtest.Connect(t, cl), dir)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := m.Acquire(ctx) // another recipe on the path: said as such
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storedSem(t, rtest.Connect(t, cl), dir, 3).Acquire(ctx); !errors.Is(err, recipe.ErrMixedRecipes) {
		t.Fatalf("a StoredLimit Acquire beside a mutex's holder: %v, want ErrMixedRecipes", err)
	}
	release(t, lm)
	setLimit(t, cl, dir, 3)
	a, err := storedSem(t, rtest.Connect(t, cl), dir, 3).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release(t, a)
	serverkit.Eventually(t, 10*time.Second, "a container sweep", func() bool { return in.Stat(dir).NumChildren == 0 })
	time.Sleep(3 * time.Second) // the test server sweeps containers every second
	if d := dirData(t, in, cl, dir); d != "limit 3" {
		t.Fatalf("after the sweep the directory holds %q", d)
	}
	_, err = storedSem(t, rtest.Connect(t, cl), dir, 5).Acquire(ctx)
	isMismatch(t, "a contender with n=5", err)
}
