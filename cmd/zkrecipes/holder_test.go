package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestHolderView: on etcd, PostgreSQL and Redis, inspect shows the lock as
// free, then held by the lock command's process with the token its command
// got, then free again; elect --observe follows the same states as JSON
// lines, and SIGINT ends it with 0.
func TestHolderView(t *testing.T) {
	t.Parallel()
	for _, ls := range lockServers {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			url, addr := ls.start(t)
			checkHolderView(t, url(addr), lockName(t), nil, "--ttl", "5s")
		})
	}
}

// TestHolderViewZooKeeper: elect --observe on ZooKeeper follows an
// election's leader (its --id, its token), as on the other backends.
func TestHolderViewZooKeeper(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	gate, g := filepath.Join(dir, "gate"), filepath.Join(dir, "g")
	obs := startProc(t, cl, dir, true, "elect", "--observe", "--json", "/elections/observed")
	expectView(t, obs, false, 0, "")
	leader := start(t, cl, dir, "elect", "--once", "/elections/observed", "--id", "lead-1", "--", "sh", "-c", grantScript(g, gate))
	tok := readGrant(t, g).token
	expectView(t, obs, true, tok, "lead-1")
	touch(t, gate)
	leader.expect(0, 30*time.Second)
	expectView(t, obs, false, 0, "")
	obs.signal(syscall.SIGINT)
	obs.expect(0, 30*time.Second)
}

// checkHolderView runs the holder view's checks on servers for name: its
// inspect, elect --observe and lock commands all take flags, and lock also
// lockFlags.
func checkHolderView(t *testing.T, servers, name string, flags []string, lockFlags ...string) {
	dir := t.TempDir()
	gate, g := filepath.Join(dir, "gate"), filepath.Join(dir, "g")
	read := func() HolderView {
		in := startOn(t, servers, dir, append(append([]string{"inspect"}, flags...), "--json", name)...)
		in.expect(0, 30*time.Second)
		var v HolderView
		if err := json.Unmarshal([]byte(in.stdout.String()), &v); err != nil {
			t.Fatalf("inspect --json: %v\n%s", err, in.stdout)
		}
		return v
	}
	if v := read(); v.Held || v.Name != name {
		t.Fatalf("before any holder: %+v", v)
	}
	obs := startServers(t, servers, dir, true, append(append([]string{"elect"}, flags...), "--observe", "--json", name)...)
	expectView(t, obs, false, 0, "")
	args := append(append(append([]string{"lock"}, flags...), lockFlags...), name, "--", "sh", "-c", grantScript(g, gate))
	holder := startOn(t, servers, dir, args...)
	tok := readGrant(t, g).token
	if v := read(); !v.Held || v.Token != tok || v.ID == "" {
		t.Fatalf("while held with token %d: %+v", tok, v)
	}
	expectView(t, obs, true, tok, "")
	touch(t, gate)
	holder.expect(0, 30*time.Second)
	expectView(t, obs, false, 0, "")
	if v := read(); v.Held {
		t.Fatalf("after the holder's release: %+v", v)
	}
	obs.signal(syscall.SIGINT)
	obs.expect(0, 30*time.Second)
}

// expectView reads p's next JSON line and fails t unless it shows the
// state (held with token, and id if not empty; or free).
func expectView(t *testing.T, p *proc, held bool, token uint64, id string) {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("the observer ended (%d):\n%s", p.wait(5*time.Second), p.stderr)
		}
		var v HolderView
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if v.Held != held || v.Token != token || (id != "" && v.ID != id) || strings.TrimSpace(line) == "" {
			t.Fatalf("observed %s, want held %v token %d id %q", line, held, token, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing observed within 30s:\n%s", p.stderr)
	}
}

// TestObserveArgs: elect follows the leader only for --observe (true)
// with none of a campaign's flags or command; every other spelling
// campaigns (and refuses --observe there).
func TestObserveArgs(t *testing.T) {
	for _, c := range []struct {
		args    []string
		observe bool
	}{
		{[]string{"--observe", "/e"}, true},
		{[]string{"--observe=true", "--json", "/e"}, true},
		{[]string{"--observe=false", "/e", "--", "true"}, false},
		{[]string{"--id", "--observe", "/e", "--", "true"}, false},
		{[]string{"--observe", "--id", "a", "/e"}, false},
		{[]string{"--observe", "/e", "--", "true"}, false},
		{[]string{"/e", "--", "--observe"}, false},
	} {
		if got := observeArgs(c.args); got != c.observe {
			t.Errorf("observeArgs(%q) = %v, want %v", c.args, got, c.observe)
		}
	}
}

// TestElectObserveWithCampaignFlags: on ZooKeeper, --observe with a
// campaign's flags or a command is a usage error (64), and --observe=false
// campaigns.
func TestElectObserveWithCampaignFlags(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	dir := t.TempDir()
	p := start(t, cl, dir, "elect", "--observe", "--id", "a", "/elections/flags", "--", "true")
	p.expect(exitUsage, 30*time.Second)
	if !strings.Contains(p.stderr.String(), "--observe only reads") {
		t.Errorf("stderr:\n%s", p.stderr)
	}
	start(t, cl, dir, "elect", "--observe=false", "--once", "/elections/flags", "--", "true").expect(0, 30*time.Second)
}
