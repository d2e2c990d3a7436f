package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest/etcdnem"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8snem"
	"github.com/zkrecipes/zkrecipes/backend/pglock/pgnemesis"
	"github.com/zkrecipes/zkrecipes/backend/redislock/redisnemesis"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// TestBackendFaults: the fault kinds package nemesis lists for each backend
// (what -faults is checked against before any server starts, and what a
// history of that backend may hold) are its Target's, no more, no fewer.
// Faults needs no server: it is asked of an unlaunched Target.
func TestBackendFaults(t *testing.T) {
	targets := map[string]nemesis.Target{"etcd": new(etcdnem.Target), "pg": new(pgnemesis.Target), "redis": new(redisnemesis.Target),
		"k8s": new(k8snem.Target)}
	for name, tgt := range targets {
		listed, ok := nemesis.BackendFaults(name)
		if !ok {
			t.Errorf("%s: not listed", name)
			continue
		}
		if want := nemesis.FaultNames(tgt); !slices.Equal(listed, want) {
			t.Errorf("%s: package nemesis lists %v, its Target has %v", name, listed, want)
		}
	}
	for _, name := range names() {
		if _, ok := nemesis.BackendFaults(name); !ok {
			t.Errorf("backend %s of the registry has no list of fault kinds", name)
		}
	}
}

// TestKnownKinds: an unknown -faults kind is refused before launch, with
// the backend's kinds.
func TestKnownKinds(t *testing.T) {
	if err := knownKinds("redis", []string{"kill-server", nemesis.FaultCut}); err != nil {
		t.Errorf("redis kill-server, cut-client: %v", err)
	}
	err := knownKinds("redis", []string{"kill-leader"})
	if err == nil || !strings.Contains(err.Error(), `redis has no fault kind "kill-leader" (it has: cut-client`) {
		t.Errorf("redis kill-leader: %v", err)
	}
}
