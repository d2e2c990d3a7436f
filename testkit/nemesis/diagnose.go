package nemesis

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// diagnose describes what each server holds when no client was granted
// after the heal: its mode and last zxid (srvr), the children of the
// recipe's directory as that server alone sees them (czxid and ephemeral
// owner of each), and the sessions with ephemeral nodes it knows of
// (dump), beside the sessions of the clients. A waiter stuck behind a node
// that one server has and another has not, or behind a node owned by a
// session no client has, shows here.
func diagnose(ctx context.Context, cl *zktest.Cluster, chroot, lockDir string, clients []*zkClient) []string {
	var out []string
	var ids []string
	for _, c := range clients {
		ids = append(ids, fmt.Sprintf("client %d 0x%x", c.id, c.s.ID()))
	}
	out = append(out, "client sessions: "+strings.Join(ids, ", "))
	for i, addr := range cl.Addrs() {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		srvr, err := zktest.FourLetter(qctx, addr, "srvr")
		cancel()
		var mode, zxid string
		for _, l := range strings.Split(srvr, "\n") {
			if v, ok := strings.CutPrefix(l, "Mode: "); ok {
				mode = v
			}
			if v, ok := strings.CutPrefix(l, "Zxid: "); ok {
				zxid = v
			}
		}
		if err != nil {
			out = append(out, fmt.Sprintf("server %d (%s): srvr: %v", i, addr, err))
			continue
		}
		out = append(out, fmt.Sprintf("server %d (%s): mode %s, zxid %s; %s: %s", i, addr, mode, zxid, lockDir, childrenAt(addr, chroot+lockDir)))
		qctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		dump, err := zktest.FourLetter(qctx, addr, "dump")
		cancel()
		if err != nil {
			dump = err.Error()
		}
		out = append(out, fmt.Sprintf("server %d dump: %s", i, strings.Join(strings.Fields(dump), " ")))
	}
	return out
}

// childrenAt lists the children of dir on the server at addr alone, each
// with its czxid and ephemeral owner.
func childrenAt(addr, dir string) string {
	conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	go func() {
		for range events {
		}
	}()
	children, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return "(no such node)"
	}
	if err != nil {
		return err.Error()
	}
	slices.Sort(children)
	var parts []string
	for _, ch := range children {
		ok, st, err := conn.Exists(path.Join(dir, ch))
		switch {
		case err != nil:
			parts = append(parts, ch+" "+err.Error())
		case !ok:
			parts = append(parts, ch+" (gone)")
		default:
			parts = append(parts, fmt.Sprintf("%s czxid=0x%x owner=0x%x", ch, st.Czxid, st.EphemeralOwner))
		}
	}
	if len(parts) == 0 {
		return "(no children)"
	}
	return strings.Join(parts, ", ")
}
