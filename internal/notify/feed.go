// Package notify is how this module's notifications reach user code
// without ever blocking the sender: Feed (one reader's unbounded queue),
// Listeners (the set of Feeds of one source) and Broadcast (a channel
// closed at every change, for waiters that re-check state).
package notify

import (
	"context"
	"sync"
)

// Feed delivers values to one reader, in order, without ever blocking the
// sender: Push appends to an unbounded queue and a delivery goroutine (Run)
// hands values to the channel C as fast as the reader takes them. It is how
// every notification of this module reaches user code (Session.Listen, the
// latch's Listen) without stalling go-zookeeper's event delivery (case C19):
// a slow reader delays only itself.
//
// A Feed is safe for concurrent use. The zero value is not usable: use
// NewFeed.
type Feed[T any] struct {
	mu    sync.Mutex
	queue []T
	final bool // Finish was called: no values after the queue
	out   chan T
	wake  chan struct{}
}

// NewFeed returns an empty Feed; start its delivery with Run.
func NewFeed[T any]() *Feed[T] {
	return &Feed[T]{out: make(chan T), wake: make(chan struct{}, 1)}
}

// C returns the channel the reader receives from. Run closes it.
func (f *Feed[T]) C() <-chan T { return f.out }

// Close closes C at once, delivering nothing: for a Feed whose source has
// ended before Run was started (Run must then not be called).
func (f *Feed[T]) Close() { close(f.out) }

// Push queues v for delivery. It never blocks. Values pushed after Finish
// are dropped.
func (f *Feed[T]) Push(v T) {
	f.mu.Lock()
	if !f.final {
		f.queue = append(f.queue, v)
	}
	f.mu.Unlock()
	f.signal()
}

// Finish queues v as the last value: Run delivers it after the values
// queued before it, then closes C.
func (f *Feed[T]) Finish(v T) {
	f.mu.Lock()
	if !f.final {
		f.queue = append(f.queue, v)
		f.final = true
	}
	f.mu.Unlock()
	f.signal()
}

func (f *Feed[T]) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run delivers queued values to C until the final value is delivered, ctx
// ends or stop is closed (undelivered values are then dropped), and closes
// C. Call it on a goroutine of its own, once.
func (f *Feed[T]) Run(ctx context.Context, stop <-chan struct{}) {
	defer close(f.out)
	for {
		v, ok, last := f.pop()
		if ok {
			select {
			case f.out <- v:
			case <-ctx.Done():
				return
			case <-stop:
				return
			}
			continue
		}
		if last {
			return
		}
		select {
		case <-f.wake:
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
	}
}

// pop returns the next value, or ok false and whether the feed is over.
func (f *Feed[T]) pop() (v T, ok, last bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		return v, false, f.final
	}
	v = f.queue[0]
	var zero T
	f.queue[0] = zero
	f.queue = f.queue[1:]
	return v, true, false
}
