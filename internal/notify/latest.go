package notify

// Latest delivers states to one reader on a channel of one slot, from one
// sender that never blocks: a state still pending there is replaced by
// the next, so a slow reader skips states but ends on the newest, and it
// never receives the same state twice in a row (same says when two are).
// The observers of every backend's lock holder use it. Offer and Close are
// for the one sender only.
type Latest[T any] struct {
	ch      chan T
	same    func(a, b T) bool
	started bool // a state was offered
	has     bool // the reader has taken one: had
	had     T    // the last state the reader took
	last    T    // the newest state offered and kept
}

// NewLatest returns a Latest comparing states with same.
func NewLatest[T any](same func(a, b T) bool) *Latest[T] {
	return &Latest[T]{ch: make(chan T, 1), same: same}
}

// C returns the reader's channel.
func (l *Latest[T]) C() <-chan T { return l.ch }

// Last returns the newest state offered (the zero T before any): what the
// reader has, or will get next.
func (l *Latest[T]) Last() T { return l.last }

// Close closes C: the sender has stopped.
func (l *Latest[T]) Close() { close(l.ch) }

// Offer hands v to the reader, in place of a state not taken yet, unless
// the reader has it already. It never blocks.
func (l *Latest[T]) Offer(v T) {
	if l.started && l.same(v, l.last) {
		return
	}
	select {
	case <-l.ch: // the pending state, replaced: the reader still has had
	default:
		if l.started { // the reader took the last one
			l.had, l.has = l.last, true
		}
	}
	l.started, l.last = true, v
	if l.has && l.same(v, l.had) {
		return // the reader has it already
	}
	l.ch <- v
}
