package releasetest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// heavy are the dependencies that a service importing only the root
// module's library packages must not find in its go.sum: each is required
// by another module of ours (a backend, an adapter, a fence, a test kit),
// never by the root module, whose tests reach none of them either (a
// module's go.mod lists what its tests import, and its users' module
// graphs inherit those requirements).
var heavy = []string{
	"testcontainers", "go.opentelemetry.io", "prometheus", "k8s.io", "go.etcd.io",
	"jackc/pgx", "modernc.org/sqlite", "redis/go-redis", "porcupine",
}

// TestLeanModuleGraph publishes the modules into a local proxy and, in a
// module outside the repository, tidies and builds a program that imports
// every library package of the root module (all but internal/..., the test
// kits and commands): its go.sum must hold no line of a heavy dependency.
func TestLeanModuleGraph(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mods, version, err := repoModules(root)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	u := newUser(t, tmp, proxy, tryingSettings(t, root, mods)["GONOSUMDB"])
	tv := publishLocked(t, root, proxy, u.modcache, mods, version)

	u.run("go", "mod", "init", "example.com/service")
	seed := seedSums(t, root, mods, filepath.Join(u.dir, "go.sum")) // tidy keeps only the lines it needs
	u.run("go", "get", mods[0].Path+"@"+tv)
	pkgs := libraryPackages(t, u, mods[0].Path)
	var src strings.Builder
	src.WriteString("// Command service imports every library package of the root module.\npackage main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(u.dir, "main.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	u.run("go", "mod", "tidy")
	u.run("go", "build", "./...")

	sum := filepath.Join(u.dir, "go.sum")
	data, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines {
		for _, h := range heavy {
			if strings.Contains(line, h) {
				t.Errorf("go.sum of a service that imports only the root module's library packages holds %q (%s)", line, h)
			}
		}
	}
	checkSums(t, sum, seed, mods)
	t.Logf("%d library packages of %s at %s (%s): go.sum has %d lines", len(pkgs), mods[0].Path, tv, strings.Join(pkgs, " "), len(lines))
}

// libraryPackages returns the packages of the root module (at path) that a
// service imports: all but internal/... and testkit/... and commands.
func libraryPackages(t *testing.T, u *user, path string) []string {
	t.Helper()
	out := u.run("go", "list", "-f", "{{.Name}} {{.ImportPath}}", path+"/...")
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, p, _ := strings.Cut(line, " ")
		elems := strings.Split(strings.TrimPrefix(p, path), "/")
		if name == "main" || slices.Contains(elems, "internal") || slices.Contains(elems, "testkit") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	for _, want := range []string{path + "/recipe", path + "/zookeeper", path + "/mutex", path + "/backend/memlock"} {
		if !slices.Contains(pkgs, want) {
			t.Fatalf("go list %s/...: %s is not among the library packages %q", path, want, pkgs)
		}
	}
	return pkgs
}
