package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/memlock"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Two processes contend for one lock; the holder is cut off from the
// server, learns of its loss, and the other one takes over with a larger
// token.
func Example() {
	srv, err := memlock.NewServer(memlock.WithTTL(300 * time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	a, b := srv.Connect(), srv.Connect()
	defer a.Close()
	defer b.Close()
	ma, _ := memlock.New(a, "nightly-report")
	mb, _ := memlock.New(b, "nightly-report")

	ctx := context.Background()
	la, err := ma.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := mb.TryAcquire(ctx); errors.Is(err, recipe.ErrLocked) {
		fmt.Println("b: locked by a")
	}

	a.CutOff() // a partition: a's requests no longer reach the server
	<-la.Context().Done()
	fmt.Println("a: lost the lock:", context.Cause(la.Context()))

	lb, err := mb.Acquire(ctx) // granted once the server expired a's session
	if err != nil {
		panic(err)
	}
	fmt.Println("b: larger token:", lb.Token() > la.Token())
	_ = lb.Release(ctx)
	// Output:
	// b: locked by a
	// a: lost the lock: recipe: connection suspended
	// b: larger token: true
}
