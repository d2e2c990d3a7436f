package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestMemberPausedAndKilled: a registered process is SIGSTOPped, then
// (another one) killed with SIGKILL; a watcher in a third process drops
// each within the backend's bound (T: the session timeout or TTL), not at
// once; the paused one, resumed, finds its registration lost and, with
// --stop-when-lost, stops its command (79). The measured times are logged
// for docs/membership.md.
func TestMemberPausedAndKilled(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	etcd := etcdtest.Shared(t)
	for _, tc := range []struct {
		name, servers, group string
		lease                []string
		T                    time.Duration
	}{
		{"ZooKeeper", strings.Join(cl.Servers(), ","), "/members-faults", []string{"--session-timeout", "2s"}, 2 * time.Second},
		{"etcd", etcd.URL(etcdtest.Prefix(t, etcd)), "faults", []string{"--ttl", "3s"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			watch := startServers(t, tc.servers, dir, true, "members", "--watch", "--json", tc.group)
			// await waits for a view of no member (since 0) or of member a
			// registered at since (the registration's own, not an earlier
			// process's).
			await := func(since int64) time.Time {
				t.Helper()
				for {
					v := groupDoc(t, nextLine(t, watch))
					if since == 0 && len(v.Members) == 0 || len(v.Members) == 1 && v.Members[0].Since == since {
						return time.Now()
					}
				}
			}
			registered := func(p *proc) int64 {
				t.Helper()
				s, _ := p.awaitLog("registered")["since"].(float64) // Join returned: not paused mid-Join
				return int64(s)
			}
			await(0)
			args := append([]string{"register"}, tc.lease...)
			args = append(args, "--stop-when-lost", "--data", "d", tc.group, "a", "--", "sleep", "60")
			paused := startServers(t, tc.servers, dir, false, args...)
			await(registered(paused))
			paused.signal(syscall.SIGSTOP)
			stopped := time.Now()
			dropped := await(0)
			if d := dropped.Sub(stopped); d < tc.T/2 || d > tc.T+3*time.Second {
				t.Errorf("a paused member was dropped %v after SIGSTOP; want between T/2 and T + 3 s (T = %v)", d, tc.T)
			} else {
				t.Logf("%s: a paused member was dropped %v after SIGSTOP (T = %v)", tc.name, d.Round(time.Millisecond), tc.T)
			}
			paused.signal(syscall.SIGCONT)
			paused.expect(exitLost, 30*time.Second)

			killed := startServers(t, tc.servers, dir, false, args...)
			await(registered(killed))
			killed.signal(syscall.SIGKILL)
			at := time.Now()
			gone := await(0)
			if d := gone.Sub(at); d < tc.T/2 || d > tc.T+3*time.Second {
				t.Errorf("a killed member was dropped %v after SIGKILL; want between T/2 and T + 3 s (T = %v)", d, tc.T)
			} else {
				t.Logf("%s: a killed member was dropped %v after SIGKILL (T = %v)", tc.name, d.Round(time.Millisecond), tc.T)
			}
			watch.signal(syscall.SIGINT)
			watch.expect(0, 30*time.Second)
		})
	}
}
