package notify

import "testing"

// TestLatest: a state pending on the channel is replaced by the next; the
// reader never gets one twice in a row, and ends on the newest.
func TestLatest(t *testing.T) {
	l := NewLatest(func(a, b int) bool { return a == b })
	l.Offer(0)
	if got := <-l.C(); got != 0 {
		t.Fatalf("first: %d", got)
	}
	l.Offer(2) // pending
	l.Offer(0) // replaces it: the reader has 0 already
	select {
	case got := <-l.C():
		t.Fatalf("a repeat of 0 was delivered: %d", got)
	default:
	}
	l.Offer(3)
	l.Offer(4)
	if got := <-l.C(); got != 4 {
		t.Fatalf("got %d, want the newest, 4", got)
	}
	l.Offer(4)
	select {
	case got := <-l.C():
		t.Fatalf("a repeat was delivered: %d", got)
	default:
	}
	// A state never taken, replaced by the zero value: the reader has
	// nothing, so the zero value is delivered.
	z := NewLatest(func(a, b int) bool { return a == b })
	z.Offer(5)
	z.Offer(0)
	if got := <-z.C(); got != 0 {
		t.Fatalf("got %d, want 0", got)
	}
	l.Close()
	if _, ok := <-l.C(); ok {
		t.Fatal("open after Close")
	}
}
