package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/backend/redislock/redistest"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/pgtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// Tests of what a new user's and an attacker's trial of the CLI found.

// TestEmptyFlagValueIsUsageError: a flag whose empty value would weaken
// what it asks for (`--tls-ca "$CA"` with CA unset connected in plaintext;
// `--auth-file ""` without credentials; `--acl ""` with the default ACL)
// is a usage error naming the flag, on every command and backend, before
// anything connects or runs.
func TestEmptyFlagValueIsUsageError(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	zkServers := strings.Join(cl.Servers(), ",")
	pg := pgtest.Shared(t).Database(t) // ?sslmode=disable
	for _, c := range []struct {
		servers string
		args    []string
		flag    string
	}{
		{zkServers, []string{"lock", "--tls-ca="}, "--tls-ca"},
		{zkServers, []string{"lock", "--tls-ca", "", "--tls-cert", "", "--tls-key", ""}, "--tls-ca"},
		{zkServers, []string{"lock", "--tls-cert="}, "--tls-cert"},
		{zkServers, []string{"lock", "--tls-key", ""}, "--tls-key"},
		{zkServers, []string{"lock", "--tls-server-name", ""}, "--tls-server-name"},
		{zkServers, []string{"lock", "--auth-file", ""}, "--auth-file"},
		{zkServers, []string{"lock", "--acl", ""}, "--acl"},
		{zkServers, []string{"elect", "--tls-ca="}, "--tls-ca"},
		{pg, []string{"lock", "--tls-ca", ""}, "--tls-ca"},
	} {
		args := append(c.args, "--wait", "0", "/cli-test/empty", "--", "touch", ran)
		if c.args[0] == "elect" {
			args = append(c.args, "--once", "/cli-test/empty", "--", "touch", ran)
		}
		p := startOn(t, c.servers, dir, args...)
		p.expect(exitUsage, 30*time.Second)
		if msg := p.stderr.String(); !strings.Contains(msg, c.flag+" was given an empty value") {
			t.Errorf("%q: the message does not name %s:\n%s", c.args, c.flag, msg)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%q: the command ran", c.args)
		}
	}
	p := startOn(t, zkServers, dir, "inspect", "--tls-ca=", "/cli-test/empty")
	p.expect(exitUsage, 30*time.Second)
}

// TestShortPasswordNotSpelledOut: a password shorter than 4 bytes is not
// searched for in the log, whose masks used to spell it out
// ("sessixxxxx cxxxxxnected" for ZK_AUTH=cron:on, "cannot connxxxxxct to
// Rxxxxxdis" for redis://:e@): the lines are logged as they are, and the
// servers attribute still hides it where it stands.
func TestShortPasswordNotSpelledOut(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	zkServers := strings.Join(cl.Servers(), ",")
	p := startEnv(t, []string{"ZK_SERVERS=" + zkServers, envAuth + "=cron:on"}, dir, false,
		"lock", "--acl", "open", "--wait", "0", "/cli-test/shortpw", "--", "true") // open: the harness deletes the nodes
	p.expect(0, 30*time.Second)
	if r := p.logged("session connected"); r == nil || r["policy"] != "revoke-on-suspend" {
		t.Errorf("the session line is not logged as it is (%v):\n%s", r, p.stderr)
	}
	rs := redistest.Start(t)
	// No such user: WRONGPASS.
	p = startOn(t, "redis://nobody:e@"+rs.Addr()+"/0", dir, "lock", "--wait", "0", "/shortpw", "--", "true")
	p.expect(exitSoftware, 30*time.Second)
	r := p.logged("cannot connect to Redis")
	if r == nil || r["servers"] != "redis://nobody:xxxxx@"+rs.Addr()+"/0" {
		t.Errorf("the connect error is not logged as it is, with the password hidden where it stands (%v):\n%s", r, p.stderr)
	}
}

// TestInspectShowsForeignNodes: a node named like a queue node of a kind
// no recipe uses (next to a lock's holder; one with a bidi override in its
// kind) made inspect fail with "another recipe's nodes" and exit 69
// ("unavailable"). inspect, the diagnosis tool, lists it, escaped and
// marked foreign, and exits 0; lock refuses the path (64) saying which kind
// it met.
func TestInspectShowsForeignNodes(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	holder := start(t, cl, dir, "lock", "/esc3", "--", "sh", "-c", gateScript(gate))
	holder.awaitLog("lock acquired")
	const guid = "0123456789abcdef0123456789abcdef"
	foo, bidi := "_c_"+guid+"-foo-0000000001", "_c_"+guid+"-lock-\u202eevil-0000000002"
	for _, n := range []string{foo, bidi} {
		if _, err := in.Conn().Create(cl.Chroot()+"/esc3/"+n, []byte(evilData), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	text := start(t, cl, dir, "inspect", "/esc3")
	text.expect(0, 30*time.Second)
	out := text.stdout.String()
	assertTermSafe(t, "inspect", out)
	if !strings.Contains(out, "mixed, 3 participant(s)") || !strings.Contains(out, strconv.Quote(bidi)) ||
		strings.Count(out, " foreign ") != 2 || !strings.Contains(out, "(foreign: ") {
		t.Errorf("inspect does not list the foreign nodes, escaped and marked:\n%s", out)
	}
	js := start(t, cl, dir, "inspect", "--json", "/esc3")
	js.expect(0, 30*time.Second)
	assertTermSafe(t, "inspect --json", js.stdout.String())
	var v View
	if err := json.Unmarshal([]byte(js.stdout.String()), &v); err != nil || len(v.Participants) != 3 {
		t.Fatalf("inspect --json: %v: %+v", err, v)
	}
	roles := map[string]string{}
	for _, e := range v.Participants {
		roles[e.Node] = e.Role + " " + e.Kind
	}
	if roles[foo] != "foreign foo" || roles[bidi] != "foreign lock-\u202eevil" || v.Recipe != "mixed" {
		t.Errorf("inspect --json: %q, recipe %q", roles, v.Recipe)
	}
	p := start(t, cl, dir, "lock", "--wait", "0", "/esc3", "--", "true")
	p.expect(exitUsage, 30*time.Second)
	if msg := p.stderr.String(); !strings.Contains(msg, `/esc3 holds a node of kind \"`) || !strings.Contains(msg, `which this queue (kinds [\"lock-\"]) does not use`) {
		t.Errorf("lock does not say which kind it met:\n%s", p.stderr)
	}
	touch(t, gate)
	holder.expect(0, 30*time.Second)
}

// TestFlagFileNotRegular: a FIFO, a device or a directory given as a file
// flag made zkrecipes hang reading it (or read forever); they, and a file
// over 1 MiB, are usage errors naming the flag, at once. Not parallel: it
// bounds how long each run takes (5 s), so it runs before the parallel
// tests, alone in the package, as TestWrongServer does.
func TestFlagFileNotRegular(t *testing.T) {
	cl := zktest.Shared(t)
	dir := t.TempDir()
	certs, err := certtest.Generate(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxFlagFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-ca", "/dev/zero"}, "--tls-ca /dev/zero: a device, not a regular file"},
		{[]string{"--tls-ca", fifo}, "--tls-ca " + fifo + ": a named pipe (FIFO), not a regular file"},
		{[]string{"--tls-ca", dir}, "--tls-ca " + dir + ": a directory"},
		{[]string{"--tls-ca", big}, "--tls-ca " + big + ": larger than 1024 KiB"},
		{[]string{"--tls-cert", fifo, "--tls-key", certs.ClientKey}, "--tls-cert " + fifo + ": a named pipe"},
		{[]string{"--tls-cert", certs.ClientCert, "--tls-key", fifo}, "--tls-key " + fifo + ": a named pipe"},
		{[]string{"--auth-file", fifo}, "--auth-file " + fifo + ": a named pipe"},
		{[]string{"--auth-file", "/dev/zero"}, "--auth-file /dev/zero: a device"},
	} {
		start := time.Now()
		p := startOn(t, strings.Join(cl.Servers(), ","), dir, append(append([]string{"lock"}, c.args...), "/cli-test/files", "--", "true")...)
		p.expect(exitUsage, 10*time.Second)
		if !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("%q: the message does not say %q:\n%s", c.args, c.want, p.stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q: took %v", c.args, d)
		}
	}
}

// TestLooseTLSKeyWarns: a --tls-key others may read is warned about as a
// loose --auth-file is (the same check); the lock is taken all the same,
// over TLS with the client certificate.
func TestLooseTLSKeyWarns(t *testing.T) {
	t.Parallel()
	cl := zktest.Start(t, zktest.WithTLS())
	f, _ := cl.TLSFiles()
	dir := t.TempDir()
	key, err := os.ReadFile(f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(loose, key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	auth := authFile(t, dir)
	if err := os.Chmod(auth, 0o640); err != nil {
		t.Fatal(err)
	}
	p := startOn(t, strings.Join(cl.SecureServers(), ","), dir, "lock", "--tls-ca", f.CA, "--tls-cert", f.ClientCert,
		"--tls-key", loose, "--auth-file", auth, "--wait", "0", "/cli-test/loose", "--", "true")
	p.expect(0, 60*time.Second)
	for flag, file := range map[string]string{"--tls-key": loose, "--auth-file": auth} {
		if r := p.logged("the " + flag + " can be read by other users: chmod 600 it"); r == nil || r["level"] != "WARN" || r["file"] != file {
			t.Errorf("no warning about the loose %s (%v):\n%s", flag, r, p.stderr)
		}
	}
}

// TestWrongDigestNoCleanupWarning: lock with wrong digest credentials on a
// --acl private path exits 70 without the misleading "cleanup delete
// deferred to the session cleaner" warning: the create the server refused
// created nothing, so there is nothing to clean up.
func TestWrongDigestNoCleanupWarning(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	in.Create("/acl", nil)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	holder := start(t, cl, dir, "lock", "--auth-file", authFile(t, dir), "--acl", "private", "/acl/w", "--", "sh", "-c", gateScript(gate))
	holder.awaitLog("lock acquired")
	p := startEnv(t, []string{"ZK_SERVERS=" + strings.Join(cl.Servers(), ","), envAuth + "=" + authUser + ":wrong-password"}, dir, false,
		"lock", "--acl", "private", "--wait", "0", "/acl/w", "--", "true")
	p.expect(exitSoftware, 30*time.Second)
	if strings.Contains(p.stderr.String(), "cleanup") {
		t.Errorf("a cleanup was logged after a refused create:\n%s", p.stderr)
	}
	touch(t, gate)
	holder.expect(0, 30*time.Second)
	// The harness, without the credentials, could not delete it.
	serverkit.Eventually(t, 20*time.Second, "the empty private lock directory removed by the server", func() bool { return in.Stat("/acl/w") == nil })
}
