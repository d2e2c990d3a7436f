package loop

import (
	"testing"
	"time"
)

// TestBackOffStartsAtInitial: the first interval is initial's, ±50 %, and
// none exceeds max ±50 %. Before, the first interval was the backoff
// package's default 500 ms ±50 % whatever initial and max said, until the
// first Reset: a renewal retried after a first failure waited up to 750 ms
// (redislock with a 2 s TTL lost leases to one dropped connection).
func TestBackOffStartsAtInitial(t *testing.T) {
	for range 100 {
		b := BackOff(10*time.Millisecond, 40*time.Millisecond)
		if d := b.NextBackOff(); d < 5*time.Millisecond || d > 15*time.Millisecond {
			t.Fatalf("first interval %v, want 10 ms ±50 %%", d)
		}
		for range 10 {
			if d := b.NextBackOff(); d > 60*time.Millisecond {
				t.Fatalf("interval %v, want at most 40 ms +50 %%", d)
			}
		}
	}
}
