package notify

// Listeners is the set of Feeds of one source (a Session's states, a
// latch's changes): every value pushed reaches each of them. It has no lock
// of its own: its owner calls every method under the lock that guards the
// state the values describe, so that a Feed added with the current state
// first misses nothing and gets nothing twice. The zero value is ready to
// use.
type Listeners[T any] struct {
	feeds map[*Feed[T]]struct{}
	over  bool // Finish was called
}

// Add registers f; it reports false, registering nothing, after Finish.
func (ls *Listeners[T]) Add(f *Feed[T]) bool {
	if ls.over {
		return false
	}
	if ls.feeds == nil {
		ls.feeds = make(map[*Feed[T]]struct{})
	}
	ls.feeds[f] = struct{}{}
	return true
}

// Remove unregisters f (when its Run has returned).
func (ls *Listeners[T]) Remove(f *Feed[T]) { delete(ls.feeds, f) }

// Push queues v for every Feed; it never blocks.
func (ls *Listeners[T]) Push(v T) {
	for f := range ls.feeds {
		f.Push(v)
	}
}

// Finish queues v as every Feed's last value (each closes its channel
// after it) and ends the set: later Adds fail, later Pushes reach nobody.
// Only the first call counts.
func (ls *Listeners[T]) Finish(v T) {
	if ls.over {
		return
	}
	ls.over = true
	for f := range ls.feeds {
		f.Finish(v)
	}
	ls.feeds = nil
}

// Finished reports whether Finish was called.
func (ls *Listeners[T]) Finished() bool { return ls.over }

// Broadcast wakes every waiter at each change: a waiter takes C under the
// owner's lock, checks the state, and waits on the channel, which Notify
// (also under that lock) closes. The zero value is ready to use.
type Broadcast struct {
	ch chan struct{}
}

// C returns the channel that the next Notify closes.
func (b *Broadcast) C() <-chan struct{} {
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Notify wakes every waiter on C.
func (b *Broadcast) Notify() {
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
