package mutex_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestHolderDuringLockDelay: with a lock-delay, a contender first in line
// that serves the delay holds no grant: Holder and ObserveHolder show the
// lock free then (B, which gives up during the delay, is never shown),
// and show C once its grant is handed out, with its token.
func TestHolderDuringLockDelay(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	const dir, delay = "/locks/holder-delay", 3 * time.Second
	newM := func() *mutex.Mutex {
		m, err := mutex.New(rtest.Connect(t, cl), dir, mutex.WithLockDelay(delay))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	la, err := newM().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obs := newM()
	states := obs.ObserveHolder(ctx)
	if st := <-states; !st.Held || st.Holder.Token != la.Token() {
		t.Fatalf("first state %v, want A's token %v", st, la.Token())
	}
	for _, n := range in.Children(dir) { // an unclean end: A's node deleted by someone else
		if st := in.Stat(dir + "/" + n); st.EphemeralOwner != 0 {
			in.Delete(dir + "/" + n)
		}
	}
	<-la.Context().Done()
	if st := <-states; st.Held {
		t.Fatalf("after A's node went: %v, want free", st)
	}
	bctx, bcancel := context.WithTimeout(ctx, delay/3) // B gives up while serving the delay
	defer bcancel()
	if _, err := newM().Acquire(bctx); err == nil {
		t.Fatal("B was granted during the delay")
	}
	if st, err := obs.Holder(ctx); err != nil || st.Held {
		t.Fatalf("Holder during the delay: %v, %v; want free", st, err)
	}
	lc, err := newM().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Release(context.Background())
	if st := <-states; !st.Held || st.Holder.Token != lc.Token() {
		t.Fatalf("after C's grant: %v, want C's token %v (B never shown)", st, lc.Token())
	}
}
