package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// groupDoc decodes members' JSON document (or one line of --watch).
func groupDoc(t *testing.T, text string) GroupView {
	t.Helper()
	var v GroupView
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("members printed no JSON document (%v): %q", err, text)
	}
	return v
}

// ids returns the view's members as "id=data", in order.
func ids(v GroupView) string {
	var out []string
	for _, m := range v.Members {
		out = append(out, m.ID+"="+m.Data)
	}
	return strings.Join(out, ",")
}

// nextLine returns p's next stdout line, failing after 20 s.
func nextLine(t *testing.T, p *proc) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("members --watch ended (exit %d); log:\n%s", p.wait(5*time.Second), p.stderr)
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatalf("members --watch printed nothing within 20 s; log:\n%s", p.dump())
	}
	return ""
}

// TestMembersRegisterZooKeeper: members of a group nobody joined is empty
// (and creates nothing); register runs its command with the group's
// variables (not ZK_AUTH) while members, from another invocation, shows
// the member with its data; a second register of the ID exits 75; members
// --watch sees the member come and go; the command's status is register's.
func TestMembersRegisterZooKeeper(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	const g = "/members-zk" // under the chroot: with ZK_AUTH its ACL is creator's, which the cleanup can delete there
	empty := start(t, cl, dir, "members", g)
	empty.expect(0, 30*time.Second)
	if out := empty.stdout.String(); !strings.HasPrefix(out, g+": no members (rev ") {
		t.Errorf("members of an empty group printed %q", out)
	}
	if st := zktest.Inspect(t, cl).Stat(g); st != nil {
		t.Errorf("members created %s", g)
	}

	watch := startProc(t, cl, dir, true, "members", "--watch", "--json", g)
	if v := groupDoc(t, nextLine(t, watch)); len(v.Members) != 0 || v.Backend != "ZooKeeper" || v.Group != g {
		t.Fatalf("the first view of an empty group: %+v", v)
	}
	gate, env := filepath.Join(dir, "gate"), filepath.Join(dir, "env")
	auth := []string{"ZK_SERVERS=" + strings.Join(cl.Servers(), ","), "ZK_AUTH=zkr:" + cliPW}
	reg := startEnv(t, auth, dir, false, "register", g, "w1", "--data", "d1", "--", "sh", "-c", "env > "+env+"; "+gateScript(gate)+"; exit 3")
	reg.awaitLog("registered")
	awaitFile(t, env)
	for v := groupDoc(t, nextLine(t, watch)); ids(v) != "w1=d1"; v = groupDoc(t, nextLine(t, watch)) {
		t.Logf("view while registering: %+v", v)
	}

	list := start(t, cl, dir, "members", "--json", g)
	list.expect(0, 30*time.Second)
	v := groupDoc(t, list.stdout.String())
	if ids(v) != "w1=d1" || v.Members[0].Since <= 0 || v.Rev < v.Members[0].Since {
		t.Errorf("members shows %+v, want w1 with data d1 and its creation revision", v)
	}
	dup := startEnv(t, auth, dir, false, "register", g, "w1", "--", "true")
	dup.expect(exitHeld, 30*time.Second)

	b, _ := os.ReadFile(env)
	for _, want := range []string{envGroup + "=" + g + "\n", envID + "=w1\n", envSessionID + "=0x"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the command's environment lacks %q", want)
		}
	}
	if bytes.Contains(b, []byte("ZK_AUTH=")) {
		t.Error("the command got ZK_AUTH")
	}

	touch(t, gate)
	reg.expect(3, 30*time.Second)
	if reg.logged("left the group") == nil {
		t.Errorf("register did not log leaving:\n%s", reg.stderr)
	}
	for v := groupDoc(t, nextLine(t, watch)); len(v.Members) != 0; v = groupDoc(t, nextLine(t, watch)) {
		t.Logf("view while leaving: %+v", v)
	}
	watch.signal(syscall.SIGINT)
	watch.expect(0, 30*time.Second)
	for _, p := range []*proc{empty, watch, reg, list, dup} {
		noSecretOut(t, "members and register with ZK_AUTH", p)
	}
}

// TestMembersRegisterEtcd: on etcd, register runs its command while
// members shows the member with its data; a second register of the ID
// exits 75; once the command has exited the group is empty.
func TestMembersRegisterEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Shared(t)
	url := srv.URL(etcdtest.Prefix(t, srv))
	dir := t.TempDir()
	gate, env := filepath.Join(dir, "gate"), filepath.Join(dir, "env")
	reg := startOn(t, url, dir, "register", "--ttl", "3s", "--data", "d1", "workers", "w1", "--",
		"sh", "-c", "env > "+env+"; "+gateScript(gate))
	reg.awaitLog("registered")
	list := startOn(t, url, dir, "members", "--json", "workers")
	list.expect(0, 30*time.Second)
	if v := groupDoc(t, list.stdout.String()); ids(v) != "w1=d1" || v.Backend != "etcd" || v.Members[0].Since <= 0 {
		t.Errorf("members shows %+v, want w1 with data d1", v)
	}
	dup := startOn(t, url, dir, "register", "workers", "w1", "--", "true")
	dup.expect(exitHeld, 30*time.Second)
	awaitFile(t, env)
	if b, _ := os.ReadFile(env); !bytes.Contains(b, []byte(envID+"=w1\n")) || bytes.Contains(b, []byte(envSessionID)) {
		t.Errorf("the command's environment: want %s=w1 and no %s", envID, envSessionID)
	}
	touch(t, gate)
	reg.expect(0, 30*time.Second)
	after := startOn(t, url, dir, "members", "--json", "workers")
	after.expect(0, 30*time.Second)
	if v := groupDoc(t, after.stdout.String()); len(v.Members) != 0 {
		t.Errorf("members after the command exited: %+v", v)
	}
}

// TestMembersRegisterUsage: a bad ID, a backend without membership and a
// flag meaning nothing for the backend are usage errors (64) before
// anything is connected; the message names the rule.
func TestMembersRegisterUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"register", "--servers", "127.0.0.1:1", "/g", "a/b", "--", "true"}, "member id"},
		{[]string{"register", "--servers", "127.0.0.1:1", "/g", "", "--", "true"}, "member id"},
		{[]string{"register", "--servers", "127.0.0.1:1", "/g", "w1"}, "no command"},
		{[]string{"register", "--servers", "127.0.0.1:1", "--ttl", "5s", "/g", "w1", "--", "true"}, "--ttl means nothing for ZooKeeper"},
		{[]string{"register", "--servers", "etcd://127.0.0.1:1", "--acl", "open", "g", "w1", "--", "true"}, "--acl means nothing for etcd"},
		{[]string{"register", "--servers", "postgres://u@127.0.0.1:1/db", "/g", "w1", "--", "true"}, membershipOnly},
		{[]string{"members", "--servers", "postgres://u@127.0.0.1:1/db", "/g"}, membershipOnly},
		{[]string{"members", "--servers", "redis://127.0.0.1:1", "/g"}, membershipOnly},
		{[]string{"members", "--servers", "k8s://", "g"}, membershipOnly},
		{[]string{"members", "--servers", "127.0.0.1:1", "g"}, "invalid path"},
		{[]string{"members", "--servers", "etcd://127.0.0.1:1", "_member_x"}, "invalid group name"},
		{[]string{"members", "--servers", "127.0.0.1:1"}, "want exactly one GROUP"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("zkrecipes %q: exit %d, want %d saying %q:\n%s", c.args, code, exitUsage, c.want, stderr.String())
		}
	}
	for _, cmd := range []string{"members", "register"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{cmd, "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Examples:") || !strings.Contains(stdout.String(), "-servers") {
			t.Errorf("%s --help: exit %d, lacks examples or flags:\n%s", cmd, code, stdout.String())
		}
	}
}

// TestMembersRegisterUnreachable: no server answering is exit 69, for
// ZooKeeper and etcd alike.
func TestMembersRegisterUnreachable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, servers := range []string{"127.0.0.1:1", "etcd://127.0.0.1:1"} {
		for _, args := range [][]string{{"members", "g"}, {"register", "g", "w1", "--", "true"}} {
			if !strings.Contains(servers, "://") {
				args = append([]string{args[0]}, append([]string{"/" + args[1]}, args[2:]...)...)
			}
			p := startOn(t, servers, dir, append([]string{args[0], "--connect-timeout", "1s"}, args[1:]...)...)
			if code := p.wait(30 * time.Second); code != exitUnavailable {
				t.Errorf("%s on %s: exit %d, want %d:\n%s", args[0], servers, code, exitUnavailable, p.stderr)
			}
		}
	}
}

// TestMembersRegisterHidePassword: a password in an etcd:// URL (refused:
// 64) or a PostgreSQL one (no membership: 64) never shows in the output.
func TestMembersRegisterHidePassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, servers := range []string{"etcd://u:" + cliPW + "@127.0.0.1:1/x", "postgres://u:" + cliPW + "@127.0.0.1:1/db"} {
		for _, args := range [][]string{{"members", "g"}, {"register", "g", "w1", "--", "true"}} {
			p := startOn(t, servers, dir, args...)
			if code := p.wait(30 * time.Second); code != exitUsage {
				t.Errorf("%s with a password in the URL: exit %d, want %d", args[0], code, exitUsage)
			}
			noSecretOut(t, args[0]+" "+strings.SplitN(servers, ":", 2)[0], p)
		}
	}
}

// TestRegisterLostEtcd: when the member's key is deleted by someone else,
// register logs the loss at WARN with its cause and the new registration
// at INFO, the command running on; with --stop-when-lost the command is
// stopped and register exits 79.
func TestRegisterLostEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Shared(t)
	prefix := etcdtest.Prefix(t, srv)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	keep := startOn(t, srv.URL(prefix), dir, "register", "workers", "w1", "--", "sh", "-c", gateScript(gate))
	stop := startOn(t, srv.URL(prefix), dir, "register", "--stop-when-lost", "--grace", "1s", "workers", "w2", "--", "sh", "-c", gateScript(gate))
	keep.awaitLog("registered")
	stop.awaitLog("registered")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli := srv.Client(t)
	for _, id := range []string{"w1", "w2"} {
		if r, err := cli.Delete(ctx, prefix+"/workers/_member_"+id); err != nil || r.Deleted != 1 {
			t.Fatalf("deleting %s's key: %v (%+v)", id, err, r)
		}
	}
	stop.expect(exitLost, 30*time.Second)
	if r := stop.logged("registration lost; the command was stopped"); r == nil || r["cause"] == nil {
		t.Errorf("--stop-when-lost did not log the loss with its cause:\n%s", stop.stderr)
	}
	if r := keep.awaitLog("registration in doubt or lost; registering again"); r["level"] != "WARN" || r["cause"] == nil {
		t.Errorf("the loss is not a WARN line with its cause: %v", r)
	}
	if r := keep.awaitLog("registered again"); r["level"] != "INFO" {
		t.Errorf("the new registration is not an INFO line: %v", r)
	}
	touch(t, gate)
	keep.expect(0, 30*time.Second)
}
