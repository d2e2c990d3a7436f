package zookeeper

import (
	"testing"
	"time"
)

// BenchmarkReplied is what one answered request costs on go-zookeeper's
// receive path (zkwire's Replied): the last server reply moves, and so do
// both ownership deadlines.
func BenchmarkReplied(b *testing.B) {
	cfg, err := buildConfig(nil)
	if err != nil {
		b.Fatal(err)
	}
	s := newSession(cfg, "")
	s.wire.lastReply.Store(time.Now().UnixNano())
	s.mu.Lock()
	s.conns.armLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.conns.disarmLocked()
		s.mu.Unlock()
	}()
	o := wireObserver{w: &s.wire, conns: &s.conns}
	for b.Loop() {
		o.Replied(time.Now().UnixNano())
	}
}
