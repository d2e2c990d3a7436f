package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// Issue 23, finding 8: ZooKeeper digest credentials and the ACL of the
// nodes zkrecipes creates.

const (
	authUser   = "locker"
	authSecret = "s3cr3t-zkr-cli-4711"
)

// TestAuthCreatorACL: with credentials from --auth-file (or ZK_AUTH),
// lock's directory gets the creator ACL (the user all, anyone read). A
// client without the digest can neither delete the holder's node nor
// queue (70, nothing left), but can inspect; a waiter with the digest
// that gives up leaves nothing; the owner's identity can delete the node.
// The password is in no log line.
func TestAuthCreatorACL(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/acl", nil) // world ACL: the test's cleanup deletes what is below
	dir := t.TempDir()
	file := authFile(t, dir)
	gate := filepath.Join(dir, "gate")
	holder := start(t, cl, dir, "lock", "--auth-file", file, "/acl/x", "--", "sh", "-c", gateScript(gate))
	holder.awaitLog("lock acquired")
	defer touch(t, gate)
	// Read with the digest: the server shows others a digest's hash as "x".
	acl, _, err := digestConn(t, cl).GetACL(cl.Chroot() + "/acl/x")
	want := append(zk.DigestACL(zk.PermAll, authUser, authSecret), zk.WorldACL(zk.PermRead)...)
	if err != nil || !slices.Equal(acl, want) {
		t.Fatalf("the lock directory's ACL: %v (%v), want %v", acl, err, want)
	}
	nodes := in.Children("/acl/x")
	if len(nodes) != 1 {
		t.Fatalf("want the holder's node, got %q", nodes)
	}
	if err := in.Conn().Delete(cl.Chroot()+"/acl/x/"+nodes[0], -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("a client without the digest deleted the holder's node: %v", err)
	}
	anon := start(t, cl, dir, "lock", "--wait", "0", "/acl/x", "--", "true")
	anon.expect(exitSoftware, 30*time.Second)
	if anon.logged("permission denied (with ZooKeeper: the path's ACL; give the credentials its nodes were created with, --auth-file or ZK_AUTH; with Kubernetes: the user's Role needs get, watch, create and update on leases)") == nil {
		t.Errorf("no clear message for the refusal:\n%s", anon.stderr)
	}
	look := start(t, cl, dir, "inspect", "/acl/x")
	look.expect(0, 30*time.Second)
	if !strings.Contains(look.stdout.String(), "holder") {
		t.Errorf("inspect without credentials:\n%s", look.stdout)
	}
	waiter := startEnv(t, []string{"ZK_SERVERS=" + strings.Join(cl.Servers(), ","), "ZK_AUTH=" + authUser + ":" + authSecret},
		dir, false, "lock", "--wait", "300ms", "/acl/x", "--", "true")
	waiter.expect(exitHeld, 30*time.Second)
	if got := in.Children("/acl/x"); !slices.Equal(got, nodes) {
		t.Fatalf("after the refused and the timed-out attempts: %q, want only %q", got, nodes)
	}

	owner := digestConn(t, cl)
	if err := owner.Delete(cl.Chroot()+"/acl/x/"+nodes[0], -1); err != nil {
		t.Fatalf("the owner's identity cannot delete the node: %v", err)
	}
	holder.expect(exitLost, 30*time.Second)
	for _, p := range []*proc{holder, anon, look, waiter} {
		if strings.Contains(p.stderr.String(), authSecret) || strings.Contains(p.stdout.String(), authSecret) {
			t.Errorf("zkrecipes %q printed the password:\n%s", p.cmd.Args[1:], p.stderr)
		}
	}
}

// TestAuthPrivateACL: --acl private hides the nodes from clients without
// the digest (inspect exits 70); with it, inspect reads them.
func TestAuthPrivateACL(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	zktest.Inspect(t, cl).Create("/acl", nil)
	dir := t.TempDir()
	file := authFile(t, dir)
	gate := filepath.Join(dir, "gate")
	holder := start(t, cl, dir, "lock", "--auth-file", file, "--acl", "private", "/acl/p", "--", "sh", "-c", gateScript(gate))
	holder.awaitLog("lock acquired")
	start(t, cl, dir, "inspect", "/acl/p").expect(exitSoftware, 30*time.Second)
	authed := start(t, cl, dir, "inspect", "--auth-file", file, "/acl/p")
	authed.expect(0, 30*time.Second)
	if !strings.Contains(authed.stdout.String(), "holder") {
		t.Errorf("inspect with the credentials:\n%s", authed.stdout)
	}
	touch(t, gate)
	holder.expect(0, 30*time.Second)
	// The lock's directory is private too: only its owner can delete it
	// (the chroot's cleanup, without credentials, could not list it).
	if err := digestConn(t, cl).Delete(cl.Chroot()+"/acl/p", -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("the owner's identity cannot delete the private directory: %v", err)
	}
}

// TestAuthUsageErrors: an ACL that needs credentials without them, a
// malformed credentials file (its content not shown), and the flags with
// another backend are usage errors.
func TestAuthUsageErrors(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("no-colon-"+authSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "--acl", "creator", "/a", "--", "true"}, "--acl creator needs ZooKeeper credentials"},
		{[]string{"lock", "--acl", "all", "--auth-file", bad, "/a", "--", "true"}, "are not user:password"},
		{[]string{"elect", "--auth-file", filepath.Join(dir, "missing"), "/a", "--", "true"}, "--auth-file: open"},
		{[]string{"lock", "--servers", "postgres://u@127.0.0.1:1/db", "--auth-file", bad, "/a", "--", "true"}, "--auth-file means nothing for PostgreSQL"},
	} {
		p := start(t, cl, dir, c.args...)
		p.expect(exitUsage, 30*time.Second)
		if !strings.Contains(p.stderr.String(), c.want) || strings.Contains(p.stderr.String(), authSecret) {
			t.Errorf("zkrecipes %q: stderr lacks %q or shows the secret:\n%s", c.args, c.want, p.stderr)
		}
	}
}

// authFile writes the test's credentials to a file only its owner reads.
func authFile(t *testing.T, dir string) string {
	t.Helper()
	file := filepath.Join(dir, "zk-auth")
	if err := os.WriteFile(file, []byte(authUser+":"+authSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// digestConn is a raw connection to cl authenticated with the test's
// credentials, closed at the test's cleanup.
func digestConn(t *testing.T, cl *zktest.Cluster) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(cl.Addrs(), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := conn.AddAuth("digest", []byte(authUser+":"+authSecret)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// quietZK discards go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
