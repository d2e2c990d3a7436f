package pglock

import (
	"testing"
	"time"
)

// BenchmarkUncontended is one Acquire and Release of a free lock: the cost
// of a grant without contention (a connection, the lock, the token bump,
// the unlock). The default lock's figure must not move with the
// lock-delay: a lock without the option runs the same statements. With
// the option, the bump marks the row and Release clears it in the
// unlocking statement: no extra round trip either.
//
//	cd backend/pglock && go test -run '^$' -bench Uncontended -benchtime 200x .
func BenchmarkUncontended(b *testing.B) {
	h := newHarness(b)
	s := h.boundedSession(b, h.cfg, "bench-uncontended")
	b.Run("default", func(b *testing.B) {
		m, err := New(s, "uncontended-default")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			mustRelease(b, mustAcquire(b, m))
		}
	})
	b.Run("lock-delay", func(b *testing.B) {
		m, err := New(s, "uncontended-delay", WithLockDelay(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			mustRelease(b, mustAcquire(b, m))
		}
	})
}
