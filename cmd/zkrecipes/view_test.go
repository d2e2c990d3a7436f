package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// participants builds a listing from "kind-" names, in order.
func participants(kinds ...string) []zookeeper.Participant {
	var ps []zookeeper.Participant
	for i, k := range kinds {
		name := fmt.Sprintf("_c_%032x-%s%010d", i+1, k, i)
		ps = append(ps, zookeeper.Participant{Name: name, Kind: k, Seq: int32(i), Token: fence.Token(100 + i), SessionID: int64(i + 1)})
	}
	return ps
}

func roles(v View) string {
	var r []string
	for _, e := range v.Participants {
		r = append(r, e.Role)
	}
	return v.Recipe + ": " + strings.Join(r, " ")
}

// TestInspectRoles: inspect tells holders from waiters with each recipe's
// own rule.
func TestInspectRoles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kinds  []string
		leases int
		want   string
	}{
		{[]string{"lock-", "lock-", "lock-"}, 0, "mutex: holder waiting waiting"},
		{[]string{"read-", "read-", "write-", "read-"}, 0, "rwlock: holder holder waiting waiting"},
		{[]string{"write-", "read-"}, 0, "rwlock: holder waiting"},
		{[]string{"read-", "read-"}, 0, "rwlock: holder holder"},
		{[]string{"lease-", "lease-", "lease-"}, 2, "semaphore: holder holder waiting"},
		{[]string{"lease-", "lease-"}, 0, "semaphore: queued queued"},
		{[]string{"elect-", "elect-"}, 0, "election: leader waiting"},
		{[]string{"latch-", "latch-"}, 0, "latch: leader waiting"},
		{[]string{"lock-", "elect-"}, 0, "mixed: queued queued"},
		{nil, 0, ": "},
	} {
		if got := roles(view("/x", true, participants(c.kinds...), c.leases)); got != c.want {
			t.Errorf("%q (leases %d): %q, want %q", c.kinds, c.leases, got, c.want)
		}
	}
}
