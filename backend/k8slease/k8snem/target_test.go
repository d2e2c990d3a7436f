package k8snem

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// inject runs tg's fault kind name as the engine would.
func inject(t *testing.T, tg *Target, name string) nemesis.Fault {
	t.Helper()
	for _, k := range tg.Faults() {
		if k.Name == name {
			f := nemesis.Fault{Kind: name, Client: -1}
			k.Inject(context.Background(), &f, 0, rand.New(rand.NewPCG(1, 2)))
			return f
		}
	}
	t.Fatalf("no fault kind %s", name)
	return nemesis.Fault{}
}

// TestRevocations: an operator's delete and takeover of a held Lease are
// certain revocations whose Below is above the holder's token (so the
// checks excuse that grant, and only grants up to it), the holder's
// context ends with recipe.ErrNodeDeleted well within T, and another
// client is granted after each with a larger token; with nothing held the
// faults revoke nothing. A client waiting through the delete (it saw the
// Lease held) is granted only after the holder's context ended, even with
// the holder's link 100 ms slower each way: the revocation excuses only a
// client that had not seen the Lease held.
func TestRevocations(t *testing.T) {
	tg := ownTarget(t)
	if err := tg.Prepare(context.Background(), "/t"); err != nil {
		t.Fatal(err)
	}
	locks := make([]recipe.Lock, 2)
	proxies := make([]*serverkit.FaultProxy, 2)
	for i := range locks {
		p := serverkit.NewFaultProxy()
		t.Cleanup(p.Close)
		proxies[i] = p
		c, err := tg.Connect(context.Background(), i, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if locks[i], err = c.Lock("/t/lock"); err != nil {
			t.Fatal(err)
		}
	}
	if f := inject(t, tg, FaultDeleteLease); f.Revokes || f.Err != "" {
		t.Fatalf("delete-lease before any grant: %+v, want no revocation and no error", f)
	}
	var last recipe.Lease
	for i, kind := range []string{FaultDeleteLease, FaultTakeLease} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := locks[i].Acquire(ctx)
		if err != nil {
			t.Fatalf("before %s: %v", kind, err)
		}
		if last != nil && l.Token() <= last.Token() {
			t.Errorf("token %d after %d: not larger", l.Token(), last.Token())
		}
		var waiter chan waited
		if kind == FaultDeleteLease {
			waiter = waitFor(ctx, t, locks[1-i])
			proxies[i].SetLatency(100 * time.Millisecond) // the holder hears of the delete after the waiter
		}
		f := inject(t, tg, kind)
		if !f.Revokes || !f.Certain || f.Err != "" || f.Below <= l.Token() {
			t.Fatalf("%s of a Lease held with token %d: %+v, want a certain revocation with Below above the token", kind, l.Token(), f)
		}
		t.Logf("%s: %s, Below %d, holder's token %d", kind, f.Target, f.Below, l.Token())
		select {
		case <-l.Context().Done():
			if cause := context.Cause(l.Context()); !errors.Is(cause, recipe.ErrNodeDeleted) {
				t.Errorf("%s: the holder's cause %v, want recipe.ErrNodeDeleted", kind, cause)
			}
		case <-time.After(tg.SessionTimeout()):
			t.Fatalf("%s: the holder's context did not end within T", kind)
		}
		ended := time.Now()
		if waiter != nil {
			w := <-waiter
			if w.err != nil {
				t.Fatalf("%s: waiter: %v", kind, w.err)
			}
			if !w.at.After(ended) || w.l.Token() <= l.Token() {
				t.Errorf("%s: waiter granted %v after the holder's end (want after), token %d (holder's %d)", kind, w.at.Sub(ended), w.l.Token(), l.Token())
			}
			if err := w.l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			proxies[i].SetLatency(0)
		}
		_ = l.Release(ctx)
		last = l
	}
	// The other client takes the Lease back from the operator.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatalf("after take-lease: %v", err)
	}
	if l.Token() <= last.Token() {
		t.Errorf("token %d after %d: not larger", l.Token(), last.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waited is an Acquire's outcome and when it returned.
type waited struct {
	l   recipe.Lease
	err error
	at  time.Time
}

// waitFor makes lock see its Lease held (TryAcquire), then acquires it in
// the background and, once it had time to watch, returns its outcome's
// channel.
func waitFor(ctx context.Context, t *testing.T, lock recipe.Lock) chan waited {
	t.Helper()
	if _, err := lock.TryAcquire(ctx); !errors.Is(err, recipe.ErrLocked) {
		t.Fatalf("TryAcquire of a held Lease: %v", err)
	}
	ch := make(chan waited, 1)
	go func() {
		l, err := lock.Acquire(ctx)
		ch <- waited{l, err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond)
	return ch
}
