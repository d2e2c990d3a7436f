package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// A follower of three cut off (its connections open but silent, as in a
// partition or a SIGSTOP) must not cost a Session connected to all three
// its lease: the two others answer. The client spreads its requests over
// the members' connections, and a connection to a silent member looks
// alive until gRPC's keep-alive gives up on it (15 s), so a keep-alive
// sent there must be abandoned and sent again in time, not waited on until
// the ownership deadline (found by the nemesis: every client lost its lease
// within seconds of a partition of one member).
func TestOneSilentMemberKeepsLeases(t *testing.T) {
	c := etcdtest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := etcdlock.Connect(ctx, c.URL("/silent"), etcdlock.WithTTL(testTTL), etcdlock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := mutex(t, s, "lock").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background()) //nolint:errcheck // checked by the context below
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Followers only: a leader cut off stops every renewal until the
	// others elect a new one (1 to 2 s with etcd's defaults, plus the
	// time to notice), which a 3 s TTL's 2 s deadline need not survive.
	for i := range c.Size() {
		if i == leader {
			continue
		}
		if err := c.Partition(i); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Context().Done():
			t.Fatalf("the lease ended with follower %d of %d cut off: %v", i, c.Size(), context.Cause(l.Context()))
		case <-time.After(testTTL * 4 / 3):
		}
	}
	c.Heal()
}
