package k8snem

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zktest/nemesis"
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
// faults revoke nothing.
func TestRevocations(t *testing.T) {
	tg := ownTarget(t)
	if err := tg.Prepare(context.Background(), "/t"); err != nil {
		t.Fatal(err)
	}
	locks := make([]recipe.Lock, 2)
	for i := range locks {
		p := zktest.NewFaultProxy()
		t.Cleanup(p.Close)
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
