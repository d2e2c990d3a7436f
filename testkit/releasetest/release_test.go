package releasetest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestInstallFromProxy publishes the modules into a local proxy and uses
// them as README's Install section says, from a module with no replace line.
func TestInstallFromProxy(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mods, version, err := repoModules(root)
	if err != nil {
		t.Fatal(err)
	}
	cmds := installCommands(t, root, mods)
	zkServers := launchZooKeeper(t) // starts while the modules are published and built

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	u := newUser(t, tmp, proxy, tryingSettings(t, root, mods)["GONOSUMDB"])
	tv := publishLocked(t, root, proxy, u.modcache, mods, version)

	u.run("go", "mod", "init", "example.com/service")
	seed := seedSums(t, root, mods, filepath.Join(u.dir, "go.sum"))
	var installs []func() string
	for _, c := range cmds {
		if c[1] == "install" { // in parallel with the program's build below
			installs = append(installs, u.start(c[0], c[1:]...))
		} else {
			u.run(c[0], c[1:]...)
		}
	}

	// The user's code: a program that locks on ZooKeeper and on memlock,
	// and a package that imports the other backends.
	if err := os.CopyFS(u.dir, os.DirFS(filepath.Join("testdata", "user"))); err != nil {
		t.Fatal(err)
	}
	// As README says, once the code imports the packages; -e because
	// offline tidy may not reach every module that tests of the packages
	// imported need only on other systems: a user online gets them from
	// the proxy, and this test's build needs none of them (online, plain
	// tidy passes too).
	u.run("go", "mod", "tidy", "-e")
	u.run("go", "build", "-o", "bin/", "./...") // the program into bin/service
	servers := zkServers()
	out := u.run(filepath.Join(u.dir, "bin", "service"), servers)
	for _, want := range []string{"zookeeper: token ", "memlock: token "} {
		if !strings.Contains(out, want) {
			t.Errorf("the program's output lacks %q:\n%s", want, out)
		}
	}

	// The command line tool, as go install put it in GOPATH/bin.
	for _, wait := range installs {
		wait()
	}
	cli := filepath.Join(u.gopath, "bin", "zkrecipes")
	if out := u.run(cli, "--help"); !strings.Contains(out, "zkrecipes lock") {
		t.Errorf("zkrecipes --help does not show the lock command:\n%s", out)
	}
	u.run(cli, "lock", "--servers", servers, "--wait", "0", "/locks/cli", "--", "true")
	if out := u.run("go", "version", "-m", cli); !strings.Contains(out, mods[0].Path+"/cmd/zkrecipes\t"+tv) {
		t.Errorf("the installed zkrecipes is not the published %s:\n%s", tv, out)
	}

	checkVersions(t, u, mods, tv)
	checkSums(t, filepath.Join(u.dir, "go.sum"), seed, mods)
}

// publishLocked publishes the modules into proxy (scripts/modules.sh
// proxy, which runs command publish: Publish) and returns
// their version, with the module cache locked until the test ends: it
// first removes the test versions that killed runs left there, and
// registers the removal of this run's.
func publishLocked(t *testing.T, root, proxy, modcache string, mods []module, release string) string {
	lockModCache(t, modcache)
	for _, v := range testVersions(modcache, mods) {
		if err := cleanModCache(modcache, mods, v); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	// As docs/releasing.md tells users to ("Trying it before a release").
	cmd := exec.Command(filepath.Join(root, "scripts", "modules.sh"), "proxy", proxy)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/modules.sh proxy %s: %v\n%s", proxy, err, stderr.Bytes())
	}
	tv := strings.TrimSpace(string(out))
	if !strings.HasPrefix(tv, release+testSuffix) {
		t.Fatalf("scripts/modules.sh proxy printed %q, want a version %s%s…", out, release, testSuffix)
	}
	t.Cleanup(func() {
		if err := cleanModCache(modcache, mods, tv); err != nil {
			t.Error(err)
		}
	})
	t.Logf("published %d modules at %s (%.1fs)", len(mods), tv, time.Since(start).Seconds())
	return tv
}

// user is a module outside the repository, with a GOPATH of its own in
// the test's temporary directory.
type user struct {
	t        *testing.T
	ctx      context.Context
	dir      string // the module's directory
	gopath   string
	modcache string // the machine's module cache
	env      []string
}

// newUser prepares the environment of the outside module. GOPROXY serves
// our modules from proxy first, then the machine's own GOPROXY: a
// third-party module comes from the machine's module cache, as `make test`
// left it, when it is there, and else from the machine's proxy. The cache
// need not hold every version the outside module selects: the workspace
// selects the newest version any of our modules requires (go-logr/logr
// v1.4.4 for otelmetrics's sake), while a user who does not import that module
// selects an older one (v1.4.3), whose source a fresh machine never
// fetched; with the proxy ending in off, the test then failed on a fresh
// machine only. The machine's cache, not one of the test's own, so that
// the third-party packages are already compiled (by make test's go vet,
// for the same directories); this run's version is removed from it at the
// end (cleanModCache; -modcacherw lets the go command's read-only copies
// be removed). GONOSUMDB=nosumdb, as docs/releasing.md tells users who try a
// version before its release: our test versions are in no checksum
// database; the third-party hashes are checked against the repository's
// own go.sum files (seedSums, checkSums), so offline the checksum database
// is never asked (a hash go.sum lacks fails the run); go install, which
// reads no go.sum, runs with GOSUMDB=off (start).
func newUser(t *testing.T, tmp, proxy, nosumdb string) *user {
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOCACHE", "GOPROXY").Output()
	caches := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(caches) != 3 {
		t.Fatalf("go env GOMODCACHE GOCACHE GOPROXY: %v %q", err, out)
	}
	u := &user{
		t: t, dir: filepath.Join(tmp, "service"), gopath: filepath.Join(tmp, "gopath"),
		modcache: caches[0],
	}
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	u.ctx = ctx
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "GO") || name == "GOROOT" || name == "GOTMPDIR" {
			u.env = append(u.env, kv)
		}
	}
	u.env = append(u.env,
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+caches[2],
		"GONOSUMDB="+nosumdb, "GOSUMDB=sum.golang.org",
		"GOFLAGS=-modcacherw",
		"GOPATH="+u.gopath,
		"GOMODCACHE="+u.modcache,
		"GOCACHE="+caches[1], // the machine's build cache
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOENV=off", // no settings of the machine's go env file (GOPRIVATE, ...)
	)
	return u
}

// run runs a command in the user's module and returns its output; it fails
// the test with the output if the command fails.
func (u *user) run(name string, args ...string) string {
	u.t.Helper()
	return u.start(name, args...)()
}

// start starts a command in the user's module and returns the function that
// waits for it (from the test's goroutine): it returns the command's
// output, or fails the test with it if the command fails. If the test ends
// first, the command is killed.
func (u *user) start(name string, args ...string) func() string {
	u.t.Helper()
	cmd := exec.CommandContext(u.ctx, name, args...)
	cmd.Dir, cmd.Env = u.dir, u.env
	if len(args) > 0 && args[0] == "install" {
		// go install PATH@VERSION reads no go.sum of ours: it would ask the
		// checksum database for the third-party modules, which a user
		// online does (GONOSUMDB leaves them checked) and this offline
		// test cannot; the build of the same packages above checked them.
		cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], "GOSUMDB=off")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	line := strings.TrimPrefix(strings.Join(append([]string{name}, args...), " "), u.dir+string(filepath.Separator))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		u.t.Fatalf("%s: %v", line, err)
	}
	waited := false
	u.t.Cleanup(func() { // the test failed before waiting: stop it before the cache is cleaned
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return func() string {
		u.t.Helper()
		waited = true
		if err := cmd.Wait(); err != nil {
			u.t.Fatalf("%s: %v\n%s", line, err, out.Bytes())
		}
		u.t.Logf("%s (%.1fs)", line, time.Since(start).Seconds())
		return out.String()
	}
}

// launchZooKeeper starts a ZooKeeper server of the test's own in the
// background and returns the function that waits for it and returns its
// connect string (or fails the test, with zktest's install hint). The
// server is closed when the test ends.
func launchZooKeeper(t *testing.T) func() string {
	type result struct {
		cl  *zktest.Cluster
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl, err := zktest.Launch(ctx)
		ch <- result{cl, err}
	}()
	var r *result
	get := func() result {
		if r == nil {
			v := <-ch
			r = &v
		}
		return *r
	}
	t.Cleanup(func() {
		if cl := get().cl; cl != nil {
			if err := cl.Close(); err != nil {
				t.Errorf("closing ZooKeeper: %v", err)
			}
		}
	})
	return func() string {
		res := get()
		if res.err != nil {
			t.Fatalf("zktest.Launch: %v", res.err)
		}
		return strings.Join(res.cl.Servers(), ",")
	}
}

// library reports whether m is a library module, which users go get (the
// root, the backends, the adapters, the fences), rather than a command or
// a test kit of the repository's own tests.
func library(m module) bool {
	top, _, _ := strings.Cut(m.Dir, "/")
	return top != "cmd" && top != "testkit"
}

// installLine is a command line of README's Install block: go get or go install.
var installLine = regexp.MustCompile(`^go (get|install) (\S+)@(\S+)\s*(#.*)?$`)

// installCommands returns the command lines of the first sh block of
// README's "## Install" section, and checks that they get every library
// module (all but the commands, cmd/...) and install the command line tool.
func installCommands(t *testing.T, root string, mods []module) [][]string {
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	var got, installed []string
	section, block := false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = line == "## Install"
		case section && !block && line == "```sh":
			block = true
		case block && line == "```":
			section, block = false, false
		case block:
			m := installLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("README.md's Install block: %q is not `go get|install PATH@VERSION  # comment`", line)
			}
			cmds = append(cmds, []string{"go", m[1], m[2] + "@" + m[3]})
			if m[1] == "get" {
				got = append(got, m[2])
			} else {
				installed = append(installed, m[2])
			}
		}
	}
	for _, m := range mods {
		if library(m) && !slices.Contains(got, m.Path) {
			t.Errorf("README.md's Install block has no `go get %s@...`", m.Path)
		}
	}
	if cli := mods[0].Path + "/cmd/zkrecipes"; !slices.Contains(installed, cli) {
		t.Errorf("README.md's Install block has no `go install %s@...`", cli)
	}
	if t.Failed() {
		t.FailNow()
	}
	return cmds
}
