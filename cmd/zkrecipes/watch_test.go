package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// watchLineRE is a node line of watch's text output.
var watchLineRE = regexp.MustCompile(`^(created|changed|deleted) ("(?:[^"\\]|\\.)*"|\S+) created=(\d+) modified=(\d+) data=("(?:[^"\\]|\\.)*")$`)

// watchLine is one line of watch's output, text or JSON, decoded.
type watchLine struct {
	kind, path        string
	created, modified int64
	data              string
	rev               int64 // the initialized line's (text); every JSON line's
}

// parseWatchText decodes a line of watch's text output.
func parseWatchText(t *testing.T, l string) watchLine {
	t.Helper()
	if rest, ok := strings.CutPrefix(l, "initialized rev="); ok {
		rev, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || rev <= 0 {
			t.Fatalf("bad initialized line %q", l)
		}
		return watchLine{kind: "initialized", rev: rev}
	}
	m := watchLineRE.FindStringSubmatch(l)
	if m == nil {
		t.Fatalf("watch printed a line of no known form: %q", l)
	}
	w := watchLine{kind: m[1], path: m[2]}
	if strings.HasPrefix(w.path, `"`) {
		w.path, _ = strconv.Unquote(w.path)
	}
	w.created, _ = strconv.ParseInt(m[3], 10, 64)
	w.modified, _ = strconv.ParseInt(m[4], 10, 64)
	var err error
	if w.data, err = strconv.Unquote(m[5]); err != nil || w.created <= 0 || w.modified < w.created {
		t.Fatalf("bad node line %q (%v)", l, err)
	}
	return w
}

// parseWatchJSON decodes a line of watch --json.
func parseWatchJSON(t *testing.T, l string) watchLine {
	t.Helper()
	var e WatchEvent
	if err := json.Unmarshal([]byte(l), &e); err != nil || e.Rev <= 0 {
		t.Fatalf("watch --json printed %q (%v)", l, err)
	}
	w := watchLine{kind: e.Kind, rev: e.Rev}
	if e.Kind == "initialized" {
		if e.WatchNode != nil || strings.Contains(l, `"path"`) {
			t.Errorf("the initialized line has node fields: %q", l)
		}
		return w
	}
	if e.WatchNode == nil || e.Data == nil || e.Created <= 0 || e.Modified < e.Created {
		t.Fatalf("a node line without its node: %q", l)
	}
	w.path, w.created, w.modified, w.data = e.Path, e.Created, e.Modified, string(e.Data)
	return w
}

// watchUntil reads p's lines (decoded by parse) until one matches want,
// and returns it with the lines read before it; it fails after 20 s.
func watchUntil(t *testing.T, p *proc, parse func(*testing.T, string) watchLine, want func(watchLine) bool) (watchLine, []watchLine) {
	t.Helper()
	var before []watchLine
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("watch ended (exit %d); log:\n%s", p.wait(5*time.Second), p.stderr)
			}
			w := parse(t, l)
			if want(w) {
				return w, before
			}
			before = append(before, w)
		case <-deadline:
			t.Fatalf("watch did not print the line awaited within 20 s (read %+v); log:\n%s", before, p.dump())
		}
	}
}

// is returns a matcher of a line of kind at path with data.
func is(kind, path, data string) func(watchLine) bool {
	return func(w watchLine) bool { return w.kind == kind && w.path == path && w.data == data }
}

// initialized matches the initialized line.
func initialized(w watchLine) bool { return w.kind == "initialized" }

// contentOf returns lines as "path=data", in order.
func contentOf(lines []watchLine) string {
	var out []string
	for _, w := range lines {
		out = append(out, w.kind+" "+w.path+"="+w.data)
	}
	return strings.Join(out, ",")
}

// zkPut creates p with data, or sets its data when it exists.
func zkPut(t *testing.T, cl *zktest.Cluster, conn *zk.Conn, p string, data []byte) {
	t.Helper()
	_, err := conn.Create(cl.Chroot()+p, data, 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNodeExists) {
		_, err = conn.Set(cl.Chroot()+p, data, -1)
	}
	if err != nil {
		t.Fatalf("writing %s: %v", p, err)
	}
}

// TestWatchZooKeeper: watch prints the subtree (data quoted, a path with a
// space quoted), then the initialized line, then a write, a creation and a
// deletion made by another client; SIGINT ends it with 0, and ZK_AUTH's
// password shows nowhere.
func TestWatchZooKeeper(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	in := zktest.Inspect(t, cl)
	for _, n := range []struct{ p, data string }{{"/w", ""}, {"/w/a", "one"}, {"/w/b", "x y\n\x1b[31m\"q\""}, {"/w/b/c d", ""}} {
		zkPut(t, cl, in.Conn(), n.p, []byte(n.data))
	}
	auth := []string{"ZK_SERVERS=" + strings.Join(cl.Servers(), ","), "ZK_AUTH=zkr:" + cliPW}
	p := startEnv(t, auth, t.TempDir(), true, "watch", "/w")
	init, content := watchUntil(t, p, parseWatchText, initialized)
	if got, want := contentOf(content), "created /w=,created /w/a=one,created /w/b=x y\n\x1b[31m\"q\",created /w/b/c d="; got != want {
		t.Errorf("watch's content:\n got %q\nwant %q", got, want)
	}
	for _, w := range content {
		if w.modified > init.rev {
			t.Errorf("%s modified at %d, after the initialized rev %d", w.path, w.modified, init.rev)
		}
	}
	zkPut(t, cl, in.Conn(), "/w/a", []byte("two"))
	if w, skipped := watchUntil(t, p, parseWatchText, is("changed", "/w/a", "two")); len(skipped) > 0 || w.created != content[1].created || w.modified <= content[1].modified {
		t.Errorf("the write: %+v (after %+v); before it %+v", w, skipped, content[1])
	}
	zkPut(t, cl, in.Conn(), "/w/new", []byte("n"))
	watchUntil(t, p, parseWatchText, is("created", "/w/new", "n"))
	in.Delete("/w/b/c d")
	watchUntil(t, p, parseWatchText, is("deleted", "/w/b/c d", ""))
	p.signal(syscall.SIGINT)
	p.expect(0, 30*time.Second)
	noSecretOut(t, "watch with ZK_AUTH", p)
}

// TestWatchJSON: with --json --mode children every line is a JSON object,
// data in base64 (bytes that are not UTF-8 come back as they were), the
// initialized line without node fields; a grandchild is not shown; a
// change shows up; SIGTERM ends it with 0.
func TestWatchJSON(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	conn := zktest.Inspect(t, cl).Conn()
	bin := string([]byte{0xff, 0x00, 'x'})
	for _, n := range []struct{ p, data string }{{"/wj", "root"}, {"/wj/a", "α"}, {"/wj/a/deep", "no"}, {"/wj/bin", bin}} {
		zkPut(t, cl, conn, n.p, []byte(n.data))
	}
	p := startProc(t, cl, t.TempDir(), true, "watch", "--json", "--mode", "children", "/wj")
	_, content := watchUntil(t, p, parseWatchJSON, initialized)
	if got, want := contentOf(content), "created /wj=root,created /wj/a=α,created /wj/bin="+bin; got != want {
		t.Errorf("watch --json's content:\n got %q\nwant %q", got, want)
	}
	zkPut(t, cl, conn, "/wj/a/deep2", []byte("no"))
	zkPut(t, cl, conn, "/wj/bin", []byte("text"))
	if _, skipped := watchUntil(t, p, parseWatchJSON, is("changed", "/wj/bin", "text")); len(skipped) > 0 {
		t.Errorf("--mode children showed %+v", skipped)
	}
	p.signal(syscall.SIGTERM)
	p.expect(0, 30*time.Second)
}

// TestWatchOnce: --once prints the snapshot, as the content and the
// initialized line of watch, and exits 0: text, JSON, --mode node, and a
// path that does not exist (the initialized line alone).
func TestWatchOnce(t *testing.T) {
	t.Parallel()
	cl := zktest.Shared(t)
	conn := zktest.Inspect(t, cl).Conn()
	zkPut(t, cl, conn, "/wo", []byte("r"))
	zkPut(t, cl, conn, "/wo/x", []byte("1"))
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		parse func(*testing.T, string) watchLine
		want  string
	}{
		{[]string{"/wo"}, parseWatchText, "created /wo=r,created /wo/x=1"},
		{[]string{"--json", "/wo"}, parseWatchJSON, "created /wo=r,created /wo/x=1"},
		{[]string{"--mode", "node", "/wo"}, parseWatchText, "created /wo=r"},
		{[]string{"/nowhere"}, parseWatchText, ""},
	} {
		p := start(t, cl, dir, append([]string{"watch", "--once"}, c.args...)...)
		p.expect(0, 30*time.Second)
		lines := strings.Split(strings.TrimSuffix(p.stdout.String(), "\n"), "\n")
		var got []watchLine
		for _, l := range lines {
			got = append(got, c.parse(t, l))
		}
		last := got[len(got)-1]
		if last.kind != "initialized" || contentOf(got[:len(got)-1]) != c.want {
			t.Errorf("watch --once %q printed %q, want %q and the initialized line", c.args, lines, c.want)
		}
	}
}

// TestWatchEtcd: on etcd, watch prints the keys below the name (paths
// without the session's prefix), then a key another client puts; --once
// prints the snapshot; SIGINT ends it with 0.
func TestWatchEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Shared(t)
	prefix := etcdtest.Prefix(t, srv)
	url, dir := srv.URL(prefix), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := srv.Client(t)
	if _, err := cli.Put(ctx, prefix+"/cfg/a", "one"); err != nil {
		t.Fatal(err)
	}
	once := startOn(t, url, dir, "watch", "--once", "cfg")
	once.expect(0, 30*time.Second)
	if out := once.stdout.String(); !regexp.MustCompile(`^created cfg/a created=\d+ modified=\d+ data="one"\ninitialized rev=\d+\n$`).MatchString(out) {
		t.Errorf("watch --once on etcd printed %q", out)
	}
	p := startServers(t, url, dir, true, "watch", "cfg")
	if _, content := watchUntil(t, p, parseWatchText, initialized); contentOf(content) != "created cfg/a=one" {
		t.Errorf("watch on etcd: content %+v", content)
	}
	if _, err := cli.Put(ctx, prefix+"/cfg/b", "two"); err != nil {
		t.Fatal(err)
	}
	watchUntil(t, p, parseWatchText, is("created", "cfg/b", "two"))
	p.signal(syscall.SIGINT)
	p.expect(0, 30*time.Second)
}

// TestWatchUsage: a bad --mode, a backend without caches, a bad path or
// name and a wrong number of arguments are usage errors (64) before
// anything is connected, the message naming the rule; --help prints the
// usage with examples.
func TestWatchUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "--servers", "127.0.0.1:1", "--mode", "subtree", "/w"}, `--mode "subtree": want tree, children or node`},
		{[]string{"watch", "--servers", "postgres://u@127.0.0.1:1/db", "/w"}, watchOnly},
		{[]string{"watch", "--servers", "redis://127.0.0.1:1", "/w"}, watchOnly},
		{[]string{"watch", "--servers", "k8s://", "w"}, watchOnly},
		{[]string{"watch", "--servers", "127.0.0.1:1", "w"}, "invalid path"},
		{[]string{"watch", "--servers", "etcd://127.0.0.1:1", "_member_x"}, "invalid name"},
		{[]string{"watch", "--servers", "127.0.0.1:1"}, "want exactly one PATH"},
		{[]string{"watch", "--servers", "127.0.0.1:1", "/a", "/b"}, "want exactly one PATH"},
		{[]string{"watch", "--servers", "127.0.0.1:1", "--ttl", "5s", "/a"}, "-ttl"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("zkrecipes %q: exit %d, want %d saying %q:\n%s", c.args, code, exitUsage, c.want, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"watch", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Examples:") || !strings.Contains(stdout.String(), "-mode") {
		t.Errorf("watch --help: exit %d, lacks examples or flags:\n%s", code, stdout.String())
	}
	if stdout.Reset(); run([]string{"--help"}, &stdout, &stderr) != 0 || !strings.Contains(stdout.String(), "zkrecipes watch [flags] PATH") {
		t.Errorf("zkrecipes --help does not list watch:\n%s", stdout.String())
	}
}

// TestWatchUnreachable: no server answering is exit 69 for ZooKeeper and
// etcd; a password in an etcd:// URL (refused: 64) or a PostgreSQL one (no
// caches: 64) never shows in the output.
func TestWatchUnreachable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		servers, path string
		want          int
	}{
		{"127.0.0.1:1", "/w", exitUnavailable},
		{"etcd://127.0.0.1:1", "w", exitUnavailable},
		{"etcd://u:" + cliPW + "@127.0.0.1:1/x", "w", exitUsage},
		{"postgres://u:" + cliPW + "@127.0.0.1:1/db", "/w", exitUsage},
	} {
		for _, once := range []string{"--once=false", "--once"} {
			p := startOn(t, c.servers, dir, "watch", "--connect-timeout", "1s", once, c.path)
			if code := p.wait(30 * time.Second); code != c.want {
				t.Errorf("watch %s on %s: exit %d, want %d:\n%s", once, redact(c.servers), code, c.want, p.stderr)
			}
			noSecretOut(t, "watch on "+strings.SplitN(c.servers, ":", 2)[0], p)
		}
	}
}

// TestWatchStatus: why the cache stopped gives the CLI's exit status for
// it, logged with the reason: over its limits and an ACL refusal 70, a
// lost session 69, a refused path 64, anything after an interrupt 0.
func TestWatchStatus(t *testing.T) {
	t.Parallel()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want int
		msg  string
	}{
		{context.Background(), fmt.Errorf("cache: %w", recipe.ErrCacheFull), exitSoftware, "over its limits"},
		{context.Background(), recipe.ErrNoPermission, exitSoftware, "permission denied"},
		{context.Background(), recipe.ErrSessionLost, exitUnavailable, "lost"},
		{context.Background(), recipe.ErrInvalidPath, exitUsage, "cannot watch the path"},
		{context.Background(), errors.New("boom"), exitSoftware, "watching failed"},
		{done, recipe.ErrCacheFull, 0, ""},
	} {
		var log bytes.Buffer
		got := cacheStatus(c.ctx, slog.New(slog.NewTextHandler(&log, nil)), c.err)
		if got != c.want || !strings.Contains(log.String(), c.msg) || (c.msg == "") != (log.Len() == 0) {
			t.Errorf("cacheStatus(%v): %d, want %d; logged %q, want %q", c.err, got, c.want, log.String(), c.msg)
		}
	}
}
