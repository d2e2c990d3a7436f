package cachestore

import (
	"context"
	"sync"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// listener is one Listen's queue: unbounded, so that the Store never
// waits for a reader; a goroutine of its own hands the events out.
type listener struct {
	mu      sync.Mutex
	q       []recipe.CacheEvent
	wake    chan struct{} // one slot: events were queued
	stopped chan struct{} // closed when the Store stops
}

func (l *listener) push(e recipe.CacheEvent) {
	l.mu.Lock()
	l.q = append(l.q, e)
	l.mu.Unlock()
	l.signal()
}

func (l *listener) stop() { close(l.stopped) }

func (l *listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// take returns the queued events.
func (l *listener) take() []recipe.CacheEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.q
	l.q = nil
	return q
}

// emitLocked queues e for every listener, once the Store was loaded
// (before, SetConsistent tells the content as it is when it is whole).
func (s *Store) emitLocked(e recipe.CacheEvent) {
	if !s.loaded {
		return
	}
	for l := range s.listeners {
		l.push(e)
	}
}

// Listen delivers the content held as NodeCreated events (sorted by path),
// CacheInitialized if the Store was loaded, then every event. The channel
// closes when ctx ends (nil: never), or at once when the Store stops,
// dropping what is queued (so that a reader gone is no goroutine left).
func (s *Store) Listen(ctx context.Context) <-chan recipe.CacheEvent {
	if ctx == nil {
		ctx = context.Background()
	}
	out := make(chan recipe.CacheEvent)
	l := &listener{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		close(out)
		return out
	}
	if s.loaded {
		for _, n := range s.sortedLocked() {
			l.q = append(l.q, recipe.CacheEvent{Kind: recipe.NodeCreated, Node: n, Rev: s.rev})
		}
		l.q = append(l.q, recipe.CacheEvent{Kind: recipe.CacheInitialized, Rev: s.rev})
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	l.signal()
	go func() {
		defer close(out)
		defer s.unlisten(l)
		for {
			select {
			case <-l.wake:
			case <-ctx.Done():
				return
			case <-l.stopped:
				return
			}
			for _, e := range l.take() {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				case <-l.stopped:
					return
				}
			}
		}
	}()
	return out
}

func (s *Store) unlisten(l *listener) {
	s.mu.Lock()
	delete(s.listeners, l)
	s.mu.Unlock()
}
