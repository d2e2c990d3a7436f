package mutex_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/locktest"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestConformanceTLS runs the conformance suite's connection properties
// (locktest.RunTransport) against the mutex with
// every client on TLS (zookeeper.WithTLS) to a server that requires a
// client certificate (zktest.WithTLS), each through its own FaultProxy:
// TLS runs over the proxied connection, so crashes and partitions cut it
// as they cut a plain one.
func TestConformanceTLS(t *testing.T) {
	cl := zktest.Start(t, zktest.WithTLS())
	locktest.RunTransport(t, &rtest.LockHarness{Cluster: cl, In: zktest.Inspect(t, cl), TLS: cl.ClientTLS(t),
		Lock: func(tb testing.TB, s *zookeeper.Session, p string) recipe.Lock { return newMutex(tb, s, p) }})
}
