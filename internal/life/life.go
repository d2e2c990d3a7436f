// Package life is the lifecycle of every backend's Session, written once:
// a closed flag, the goroutines and operations that Close waits for, and a
// context that ends when Close is called, with cause
// recipe.ErrSessionClosed.
package life

import (
	"context"
	"sync"

	"github.com/zkrecipes/zkrecipes/internal/ctxend"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Group tracks one Session's goroutines and operations. The zero value is
// not usable: call New.
type Group struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns an open Group.
func New() *Group {
	g := &Group{}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	return g
}

// Context is done once Close was called, with cause
// recipe.ErrSessionClosed.
func (g *Group) Context() context.Context { return g.ctx }

// Closed reports whether Close was called.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Enter counts an operation that Close waits for, or reports false (and
// counts nothing) when the Group is closed. Call Exit when it ends.
func (g *Group) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Exit ends an operation counted by Enter.
func (g *Group) Exit() { g.wg.Done() }

// Go runs f on a goroutine that Close waits for, or reports false
// (running nothing) when the Group is closed.
func (g *Group) Go(f func()) bool {
	if !g.Enter() {
		return false
	}
	go func() {
		defer g.Exit()
		f()
	}()
	return true
}

// Bind returns a context done when ctx is or when Close is called, with
// the cause of whichever came first.
func (g *Group) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	return ctxend.Also(ctx, g.ctx)
}

// Close marks the Group closed and ends its Context, and reports whether
// this call did (false for every later call). It does not wait: the
// Session ends what it owns (leases, connections), then calls Wait.
func (g *Group) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	g.cancel(recipe.ErrSessionClosed)
	return true
}

// Wait blocks until every goroutine and operation counted ends.
func (g *Group) Wait() { g.wg.Wait() }
