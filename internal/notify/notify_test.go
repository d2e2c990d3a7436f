package notify

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestListeners: every Feed gets every value in order, the final one last,
// and its channel is closed after it; a Feed added after Finish is refused.
func TestListeners(t *testing.T) {
	var ls Listeners[int]
	fs := []*Feed[int]{NewFeed[int](), NewFeed[int]()}
	for _, f := range fs {
		if !ls.Add(f) {
			t.Fatal("Add refused before Finish")
		}
		go f.Run(context.Background(), nil)
	}
	ls.Push(1)
	ls.Push(2)
	ls.Finish(3)
	ls.Push(4)
	for i, f := range fs {
		var got []int
		for v := range f.C() {
			got = append(got, v)
		}
		if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
			t.Errorf("feed %d got %v, want [1 2 3]", i, got)
		}
	}
	if ls.Add(NewFeed[int]()) || !ls.Finished() {
		t.Error("Add accepted a Feed after Finish")
	}
}

// TestBroadcast: Notify closes the channel taken before it, and only that.
func TestBroadcast(t *testing.T) {
	var b Broadcast
	before := b.C()
	b.Notify()
	after := b.C()
	select {
	case <-before:
	default:
		t.Error("the channel taken before Notify is open")
	}
	select {
	case <-after:
		t.Error("the channel taken after Notify is closed")
	default:
	}
}
