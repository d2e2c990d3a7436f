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
	joined  bool          // it got the content (Store.mu)
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

// emitLocked queues e for every listener that got the content (the
// others get it, as it is then, at the next consistent point).
func (s *Store) emitLocked(e recipe.CacheEvent) {
	for l := range s.listeners {
		if l.joined {
			l.push(e)
		}
	}
}

// joinLocked gives the listeners that wait the content, then
// CacheInitialized, at the Store's Rev.
func (s *Store) joinLocked() {
	var evs []recipe.CacheEvent
	for l := range s.listeners {
		if l.joined {
			continue
		}
		if evs == nil {
			for _, n := range s.sortedLocked() {
				evs = append(evs, recipe.CacheEvent{Kind: recipe.NodeCreated, Node: n, Rev: s.rev})
			}
			evs = append(evs, recipe.CacheEvent{Kind: recipe.CacheInitialized, Rev: s.rev})
		}
		l.mu.Lock()
		l.q = append(l.q, evs...)
		l.mu.Unlock()
		l.signal()
		l.joined = true
	}
}

// Listen delivers the content as NodeCreated events (sorted by path) and
// CacheInitialized, as the Store holds it at its next consistent point
// (now, if it is consistent), then every event. The channel
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
	s.listeners[l] = struct{}{}
	if s.consistent {
		s.joinLocked()
	}
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
