package zookeeper

import (
	"testing"
	"time"
)

// TestRTTFilterKeepsTheLink: the link's round trip is the smallest of the
// last few: a cold server's slow first replies do not stretch it, a link
// that became slow does once its replies fill the filter.
func TestRTTFilterKeepsTheLink(t *testing.T) {
	var f rttFilter
	ms := int64(time.Millisecond)
	if f.get() != 0 {
		t.Fatal("a round trip before any reply")
	}
	f.note(1500 * ms) // a cold JVM's first reply
	f.note(3 * ms)
	f.note(900 * ms) // a loaded machine
	if got := f.get(); got != 3*time.Millisecond {
		t.Fatalf("get = %v, want 3ms", got)
	}
	for i := range rttSamples - 2 { // the quick reply is still one of the last rttSamples
		f.note(int64(700+i) * ms) // the link became slow
	}
	if got := f.get(); got != 3*time.Millisecond {
		t.Fatalf("with the quick reply still kept: %v, want 3ms", got)
	}
	f.note(710 * ms)
	if got := f.get(); got != 700*time.Millisecond {
		t.Fatalf("after %d slow replies: %v, want 700ms", rttSamples, got)
	}
	if f.next.Load() != 3+rttSamples-2+1 {
		t.Fatalf("%d replies noted", f.next.Load())
	}
}
