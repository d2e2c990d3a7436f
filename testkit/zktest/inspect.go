package zktest

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Inspector is a raw go-zookeeper connection to a Cluster (no recipes), for
// tests that look at the tree or tamper with it as an operator would. Paths
// given to its methods are relative to the cluster's chroot. Every method
// fails the test on an unexpected error.
type Inspector struct {
	t      testing.TB
	conn   *zk.Conn
	chroot string
}

// Inspect connects an Inspector to cl (session timeout 10 s) and returns
// once its session is established (failing the test after 20 s): its
// connection's goroutines run from then on, so a goleak.IgnoreCurrent taken
// after Inspect covers them. The connection is closed at the test's
// cleanup.
func Inspect(t testing.TB, cl *Cluster) *Inspector {
	t.Helper()
	conn, events, err := zk.Connect(cl.Addrs(), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkLogger{discardLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	timeout := time.After(20 * time.Second)
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-timeout:
			t.Fatalf("zktest: no session with %v within 20 s", cl.Addrs())
		}
	}
	return &Inspector{t: t, conn: conn, chroot: cl.Chroot()}
}

// abs is p with the chroot: "/" is the chroot itself.
func (in *Inspector) abs(p string) string {
	if p == "/" && in.chroot != "" {
		return in.chroot
	}
	return in.chroot + p
}

// Conn returns the raw connection; its paths include the chroot.
func (in *Inspector) Conn() *zk.Conn { return in.conn }

// Children lists the children of p ("/" lists the chroot's), sorted; nil
// if p does not exist. ZooKeeper operation: getChildren.
func (in *Inspector) Children(p string) []string {
	in.t.Helper()
	c, _, err := in.conn.Children(in.abs(p))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		in.t.Fatalf("children %s: %v", p, err)
	}
	slices.Sort(c)
	return c
}

// Owned lists the children of dir whose ephemeral owner is session.
// ZooKeeper operations: getChildren, exists per child.
func (in *Inspector) Owned(dir string, session int64) []string {
	in.t.Helper()
	var out []string
	for _, c := range in.Children(dir) {
		ok, st, err := in.conn.Exists(in.chroot + path.Join(dir, c))
		if err != nil {
			in.t.Fatal(err)
		}
		if ok && st.EphemeralOwner == session {
			out = append(out, c)
		}
	}
	return out
}

// Stat returns p's Stat, or nil if p does not exist. ZooKeeper operation:
// exists.
func (in *Inspector) Stat(p string) *zk.Stat {
	in.t.Helper()
	ok, st, err := in.conn.Exists(in.abs(p))
	if err != nil {
		in.t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return st
}

// Delete deletes p (any version). ZooKeeper operation: delete.
func (in *Inspector) Delete(p string) {
	in.t.Helper()
	if err := in.conn.Delete(in.abs(p), -1); err != nil {
		in.t.Fatalf("delete %s: %v", p, err)
	}
}

// DeleteAll deletes p and its children in one transaction, as an
// operator's "deleteall" of a recipe directory does (or a restore from a
// snapshot taken before it existed), retrying while children appear
// meanwhile. It returns how many children it deleted; a missing p is 0.
// The children must have no children of their own.
func (in *Inspector) DeleteAll(p string) int {
	in.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		if in.Stat(p) == nil {
			return 0
		}
		kids := in.Children(p)
		ops := make([]any, 0, len(kids)+1)
		for _, c := range kids {
			ops = append(ops, &zk.DeleteRequest{Path: in.chroot + path.Join(p, c), Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: in.abs(p), Version: -1})
		_, err := in.conn.Multi(ops...)
		if err == nil {
			return len(kids)
		}
		if !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoNode) {
			in.t.Fatalf("deleteall %s: %v", p, err)
		}
	}
	in.t.Fatalf("deleteall %s: children kept appearing", p)
	return 0
}

// Create creates p and its missing parents as persistent znodes (world
// ACL), with acl on p itself when acl is not nil. An existing node is fine.
func (in *Inspector) Create(p string, acl []zk.ACL) {
	in.t.Helper()
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := in.chroot
	for i, part := range parts {
		cur += "/" + part
		a := zk.WorldACL(zk.PermAll)
		if i == len(parts)-1 && acl != nil {
			a = acl
		}
		if _, err := in.conn.Create(cur, nil, 0, a); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			in.t.Fatalf("create %s: %v", cur, err)
		}
	}
}
