package nemesis

import (
	"slices"
	"sync"
)

// backendFaults is each known backend's own fault kinds (Target.Faults'
// names, every one the backend can make): what a history of that backend
// may hold beside the generic kinds, and what cmd/nemesis checks -faults
// against before it starts any server. The backends' modules can't be
// imported here (they import this package), so their names are written
// again; cmd/nemesis's TestBackendFaults compares them with each Target.
var backendFaults = map[string][]string{
	"zk":    append(slices.Clone(ServerFaults), FaultExpire, FaultDeleteDir),
	"etcd":  {"kill-member", "kill-leader", "pause-member", "partition-member", "compact", "revoke-lease"},
	"pg":    {"terminate-backend", "restart-fast", "restart-immediate", "pause-server"},
	"redis": {"kill-server", "pause-server", "sleep-server", "client-kill", "delete-key"},
	"k8s":   {"kill-apiserver", "pause-apiserver", "kill-etcd", "delete-lease", "take-lease"},
}

var backendsMu sync.Mutex

// RegisterBackend adds a backend outside this repository's five (zk,
// etcd, pg, redis, k8s), with its own fault kinds, so that its histories read
// back (ReadHistory refuses an unknown Backend, or a fault kind its
// backend does not have). A name already known is replaced.
func RegisterBackend(name string, faults []string) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backendFaults[name] = slices.Clone(faults)
}

// BackendFaults returns every fault kind of the backend name, the generic
// ones first, then its own; ok is false for a backend this package does
// not know (RegisterBackend).
func BackendFaults(name string) (kinds []string, ok bool) {
	backendsMu.Lock()
	own, ok := backendFaults[name]
	backendsMu.Unlock()
	if !ok {
		return nil, false
	}
	return append(slices.Clone(GenericFaults), own...), true
}

// Backends lists the known backends' names, in order.
func Backends() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	var out []string
	for n := range backendFaults {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
