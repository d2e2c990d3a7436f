package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

type suite struct {
	h  Harness
	lt LeaseTime
}

// expiryWait bounds a wait that includes a lease expiring or a healed client
// reconnecting: the timed assertions use Max; this only turns a hang into a
// failure.
func (s *suite) expiryWait() time.Duration { return 2 * s.lt.Max }

// stepCtx returns a context for one step that should complete promptly: it
// ends OpTimeout from now (or when t ends). Each step gets its own, so a
// slow earlier step under load cannot use up a later step's time.
func stepCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	t.Cleanup(cancel)
	return ctx
}

// acquire takes the lock with Acquire on c, failing the test if that does not
// succeed within OpTimeout or the lease is not sound.
func (s *suite) acquire(t *testing.T, c Client, who string) recipe.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	l, err := acquireWithin(t, who, c, ctx)
	if err != nil {
		t.Fatalf("%s: Acquire of a lock nobody holds: %v", who, err)
	}
	checkFresh(t, l, who)
	return l
}

// checkFresh checks a lease just granted: a token, a live context.
func checkFresh(t *testing.T, l recipe.Lease, who string) {
	t.Helper()
	if l == nil {
		t.Fatalf("%s: Acquire returned a nil Lease and no error", who)
	}
	if l.Token().IsZero() {
		t.Errorf("%s: granted with the zero token", who)
	}
	if err := l.Context().Err(); err != nil {
		t.Errorf("%s: lease context already done at the grant (cause %v)", who, context.Cause(l.Context()))
	}
}

// release releases l, failing the test on an error.
func release(t *testing.T, l recipe.Lease, who string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("%s: Release: %v", who, err)
	}
}

// releaseQuietly releases l ignoring the outcome (teardown paths).
func releaseQuietly(l recipe.Lease) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	_ = l.Release(ctx)
}

// result is the outcome of an asynchronous Acquire.
type result struct {
	lease recipe.Lease
	err   error
	at    time.Time // when Acquire returned
}

// pending is an Acquire running in its own goroutine.
type pending struct {
	ch <-chan result
}

// acquireAsync runs c.Acquire in a goroutine with a context bounded by
// expiryWait. onReturn, if not nil, runs in that goroutine right after
// Acquire returns, before the result is published. A cleanup cancels the
// context, waits for the goroutine and releases a lease nobody collected.
func (s *suite) acquireAsync(t *testing.T, c Client, onReturn func(recipe.Lease, error)) pending {
	t.Helper()
	return startAcquire(t, c, context.Background(), s.expiryWait(), onReturn)
}

// startAcquire is acquireAsync with a context derived from parent and
// bounded by wait.
func startAcquire(t *testing.T, c Client, parent context.Context, wait time.Duration, onReturn func(recipe.Lease, error)) pending {
	t.Helper()
	ctx, cancel := context.WithTimeout(parent, wait)
	ch := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := c.Acquire(ctx)
		at := time.Now()
		if onReturn != nil {
			onReturn(l, err)
		}
		ch <- result{l, err, at}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(OpTimeout):
			t.Errorf("an Acquire did not return within %v after its context was cancelled", OpTimeout)
			return
		}
		select {
		case r := <-ch:
			releaseQuietly(r.lease)
		default:
		}
	})
	return pending{ch}
}

// await waits up to d for p's result; what describes the wait for the
// failure message. It fails the test if the Acquire failed.
func await(t *testing.T, p pending, d time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-p.ch:
		if r.err != nil {
			t.Fatalf("%s: Acquire: %v", what, r.err)
		}
		checkFresh(t, r.lease, what)
		return r
	case <-time.After(d):
		t.Fatalf("%s: Acquire did not return within %v", what, d)
		return result{}
	}
}

// expectLeftovers waits until the backend stores exactly want entries for
// lock, failing after expiryWait. Leftovers must settle: an entry that is
// never removed fails, one removed in the background by a cleaner passes.
func (s *suite) expectLeftovers(t *testing.T, lock string, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(s.expiryWait())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
		n, err := s.h.Leftovers(ctx, lock)
		cancel()
		if err != nil {
			t.Fatalf("Leftovers(%q): %v", lock, err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries stored for the lock, want %d (%s)", n, want, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lossCause reports whether cause is one of the causes recipe.Lease documents
// for an ownership loss (as opposed to ErrReleased or nothing).
func lossCause(cause error) bool {
	return errors.Is(cause, recipe.ErrSuspended) || errors.Is(cause, recipe.ErrSessionLost) ||
		errors.Is(cause, recipe.ErrNodeDeleted)
}

// waitDone waits up to d for ctx to be done and reports whether it is.
func waitDone(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(d):
		return false
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// acquireWithin calls c.Acquire(ctx) and fails the test if it has not
// returned OpTimeout after ctx is done (a backend that ignores its context
// must fail the suite, not hang it). A lease that arrives after the test
// gave up is released.
func acquireWithin(t *testing.T, who string, c Client, ctx context.Context) (recipe.Lease, error) {
	t.Helper()
	ch := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx)
		ch <- result{l, err, time.Now()}
	}()
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-time.After(OpTimeout):
		go func() { releaseQuietly((<-ch).lease) }()
		t.Fatalf("%s: Acquire did not return within %v after its context was done (%v)", who, OpTimeout, context.Cause(ctx))
		return nil, nil
	}
}
