package grouptest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// stamped is one delivered value and when it arrived.
type stamped[T any] struct {
	v  T
	at time.Time
}

// recorder records every value a channel delivers (a Watch, a Listen) in a
// goroutine, checking each as it arrives.
type recorder[T any] struct {
	t   *testing.T
	who string
	// check runs on each value as it arrives, before it is recorded, with
	// the values recorded so far; it reports problems with t.Errorf.
	check func(prev []stamped[T], cur stamped[T])

	mu    sync.Mutex
	items []stamped[T]
	more  chan struct{} // closed at the next value or the end
	ended bool          // the channel closed
}

// record starts recording what open delivers, on a context cancelled at
// t's cleanup; the cleanup then waits (OpTimeout) for the channel to close.
func record[T any](t *testing.T, who string, open func(context.Context) <-chan T, check func([]stamped[T], stamped[T])) *recorder[T] {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder[T]{t: t, who: who, check: check, more: make(chan struct{})}
	ch := open(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := range ch {
			r.add(stamped[T]{v, time.Now()})
		}
		r.mu.Lock()
		r.ended = true
		close(r.more)
		r.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(OpTimeout):
			t.Errorf("%s: channel not closed within %v after its context was cancelled", who, OpTimeout)
		}
	})
	return r
}

func (r *recorder[T]) add(s stamped[T]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.check != nil {
		r.check(r.items, s)
	}
	r.items = append(r.items, s)
	close(r.more)
	r.more = make(chan struct{})
}

// all returns what was recorded so far.
func (r *recorder[T]) all() []stamped[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stamped[T](nil), r.items...)
}

// waitFor waits up to d for a value at index from or later for which ok
// holds, and returns its index and it. It fails the test if there is none
// by then, or the channel closes first.
func (r *recorder[T]) waitFor(from int, d time.Duration, what string, ok func(T) bool) (int, stamped[T]) {
	r.t.Helper()
	i, s, err := r.await(from, d, what, ok)
	if err != nil {
		r.t.Fatal(err)
	}
	return i, s
}

// await is waitFor returning an error instead of failing the test, for
// goroutines other than the test's.
func (r *recorder[T]) await(from int, d time.Duration, what string, ok func(T) bool) (int, stamped[T], error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		r.mu.Lock()
		for i := from; i < len(r.items); i++ {
			if ok(r.items[i].v) {
				s := r.items[i]
				r.mu.Unlock()
				return i, s, nil
			}
		}
		from = max(from, len(r.items))
		more, ended, n := r.more, r.ended, len(r.items)
		var last any = "nothing"
		if n > 0 {
			last = r.items[n-1].v
		}
		r.mu.Unlock()
		if ended {
			return 0, stamped[T]{}, fmt.Errorf("%s: the channel closed before delivering %s (%d delivered; the last: %v)", r.who, what, n, last)
		}
		select {
		case <-more:
		case <-timer.C:
			return 0, stamped[T]{}, fmt.Errorf("%s: no %s delivered within %v (%d delivered; the last: %v)", r.who, what, d, n, last)
		}
	}
}

// count returns how many values were recorded so far.
func (r *recorder[T]) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// untilLast waits up to d until the latest value satisfies ok and returns
// it.
func (r *recorder[T]) untilLast(d time.Duration, what string, ok func(T) bool) T {
	r.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		r.mu.Lock()
		n, more, ended := len(r.items), r.more, r.ended
		var last T
		if n > 0 {
			last = r.items[n-1].v
		}
		r.mu.Unlock()
		if n > 0 && ok(last) {
			return last
		}
		if ended {
			r.t.Fatalf("%s: the channel closed; the last value is not %s: %v", r.who, what, last)
		}
		select {
		case <-more:
		case <-timer.C:
			r.t.Fatalf("%s: the last value delivered is not %s after %v: %v", r.who, what, d, last)
		}
	}
}

// waitEnd waits up to d for the channel to close.
func (r *recorder[T]) waitEnd(d time.Duration) []stamped[T] {
	r.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		r.mu.Lock()
		more, ended := r.more, r.ended
		r.mu.Unlock()
		if ended {
			return r.all()
		}
		select {
		case <-more:
		case <-timer.C:
			r.t.Fatalf("%s: the channel is still open after %v", r.who, d)
		}
	}
}

// watch records c's Watch, checking that every View is well formed, that
// no Rev is below the previous one and that two Views with the same Rev
// show the same members. hook, if not nil, runs on each View as it
// arrives.
func watch(t *testing.T, c Client, who string, hook func(recipe.View)) *recorder[recipe.View] {
	check := func(prev []stamped[recipe.View], cur stamped[recipe.View]) {
		v := cur.v
		if p := viewProblem(v); p != "" {
			t.Errorf("%s: delivered View %d: %s", who, len(prev), p)
		}
		if n := len(prev); n > 0 {
			if last := prev[n-1].v; v.Rev < last.Rev {
				t.Errorf("%s: delivered View %d has Rev %d, below the previous %d: %s after %s", who, n, v.Rev, last.Rev, show(v), show(last))
			} else if v.Rev == last.Rev && !sameMembers(v.Members, last.Members) {
				t.Errorf("%s: delivered View %d has the Rev of the previous one but other members: %s after %s", who, n, show(v), show(last))
			}
		}
		if hook != nil {
			hook(v)
		}
	}
	return record(t, who, c.Watch, check)
}

// listen records m's Listen, checking that each Registration is well
// formed (a registration began with Since > 0 and no Cause; one ended with
// a Cause), that the first is the live registration and that no
// registration begins before the previous one ended.
func listen(t *testing.T, m recipe.Member, who string) *recorder[recipe.Registration] {
	check := func(prev []stamped[recipe.Registration], cur stamped[recipe.Registration]) {
		r, n := cur.v, len(prev)
		switch {
		case r.Registered && (r.Since <= 0 || r.Cause != nil):
			t.Errorf("%s: Registration %d began with Since %d, Cause %v: want Since > 0, no Cause", who, n, r.Since, r.Cause)
		case !r.Registered && r.Cause == nil:
			t.Errorf("%s: Registration %d ended with no Cause", who, n)
		case n == 0 && !r.Registered:
			t.Errorf("%s: Listen on a live member delivered first an ended registration (cause %v)", who, r.Cause)
		case n > 0 && r.Registered && prev[n-1].v.Registered:
			t.Errorf("%s: Registration %d began (Since %d) while the previous one (Since %d) was not reported ended", who, n, r.Since, prev[n-1].v.Since)
		}
	}
	return record(t, who, m.Listen, check)
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
