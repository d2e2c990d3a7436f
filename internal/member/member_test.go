package member

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLease is a registration of fakeReg.
type fakeLease struct {
	tok    fence.Token
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (l *fakeLease) Token() fence.Token       { return l.tok }
func (l *fakeLease) Context() context.Context { return l.ctx }
func (l *fakeLease) Release(context.Context) error {
	l.cancel(recipe.ErrReleased)
	return nil
}

// fakeReg is a Registrar in memory: Register returns the next error of
// errs, if any, else a new lease; block, if set, makes Register wait for
// its ctx.
type fakeReg struct {
	mu      sync.Mutex
	n       int
	errs    []error
	block   bool
	leases  []*fakeLease
	data    [][]byte
	removed int
}

func (r *fakeReg) Register(ctx context.Context, data []byte) (recipe.Lease, error) {
	r.mu.Lock()
	block := r.block
	var err error
	if len(r.errs) > 0 {
		err, r.errs = r.errs[0], r.errs[1:]
	}
	r.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	l := &fakeLease{tok: fence.Token(r.n)}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	r.leases = append(r.leases, l)
	r.data = append(r.data, data)
	return l, nil
}

func (r *fakeReg) Update(context.Context, recipe.Lease, []byte) error { return nil }
func (r *fakeReg) Remove(context.Context) error {
	r.mu.Lock()
	r.removed++
	r.mu.Unlock()
	return nil
}

func (r *fakeReg) lease(i int) *fakeLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leases[i]
}

func next(t *testing.T, ch <-chan recipe.Registration) recipe.Registration {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no change within 5 s")
	}
	return recipe.Registration{}
}

// TestRegistersAgain: a registration that ends is made again after a
// failed attempt, with the data of the last Update; Leave ends it all and
// a Listen after that gets the final Registration.
func TestRegistersAgain(t *testing.T) {
	r := &fakeReg{}
	ctx := context.Background()
	m, err := Join(ctx, "a", []byte("1"), r, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ch := m.Listen(ctx)
	if c := next(t, ch); !c.Registered || c.Since != 1 {
		t.Fatalf("first %+v", c)
	}
	if err := m.Update(ctx, []byte("2")); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.errs = []error{errors.New("transient")}
	r.mu.Unlock()
	r.lease(0).cancel(recipe.ErrSessionLost)
	if c := next(t, ch); c.Registered || !errors.Is(c.Cause, recipe.ErrSessionLost) {
		t.Fatalf("loss %+v", c)
	}
	if c := next(t, ch); !c.Registered || c.Since != 2 {
		t.Fatalf("again %+v", c)
	}
	if string(r.data[1]) != "2" {
		t.Fatalf("registered again with %q", r.data[1])
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c.Registered || !errors.Is(c.Cause, recipe.ErrLeft) {
		t.Fatalf("final %+v", c)
	}
	if c := next(t, m.Listen(ctx)); !errors.Is(c.Cause, recipe.ErrLeft) {
		t.Fatalf("Listen after Leave: %+v", c)
	}
	if _, err := m.Registered(ctx); !errors.Is(err, recipe.ErrLeft) {
		t.Fatal(err)
	}
	if r.removed != 1 || r.lease(1).ctx.Err() == nil {
		t.Fatal("Leave left the registration")
	}
}

// TestPermanentErrorStops: an error retrying cannot cure ends the member.
func TestPermanentErrorStops(t *testing.T) {
	r := &fakeReg{}
	ctx := context.Background()
	m, err := Join(ctx, "a", nil, r, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.errs = []error{recipe.ErrNoPermission}
	r.mu.Unlock()
	r.lease(0).cancel(recipe.ErrNodeDeleted)
	ctx5, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := m.Registered(ctx5); !errors.Is(err, recipe.ErrNoPermission) {
		t.Fatalf("Registered: %v", err)
	}
	if err := m.Update(ctx5, nil); !errors.Is(err, recipe.ErrNoPermission) {
		t.Fatalf("Update: %v", err)
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUpdateBoundedByItsContext: an Update that waits behind a
// registration stuck in the loop returns at its ctx's end.
func TestUpdateBoundedByItsContext(t *testing.T) {
	r := &fakeReg{}
	ctx := context.Background()
	m, err := Join(ctx, "a", nil, r, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave(ctx)
	r.mu.Lock()
	r.block = true
	r.mu.Unlock()
	r.lease(0).cancel(recipe.ErrSuspended)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := m.Update(short, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update: %v", err)
	}
}
