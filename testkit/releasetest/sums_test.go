package releasetest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seedSums writes to path (the user's go.sum) every line of the
// repository's go.sum files, and returns them: the hashes that were checked
// against the checksum database when the dependencies were added. The go
// command then checks every third-party module it takes from the local
// cache against them.
func seedSums(t *testing.T, root string, mods []module, path string) map[string]bool {
	seed := map[string]bool{}
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(root, m.Dir, "go.sum"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line != "" {
				seed[line] = true
			}
		}
	}
	lines := make([]string, 0, len(seed))
	for line := range seed {
		lines = append(lines, line)
	}
	slices.Sort(lines)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return seed
}

// checkSums fails the test if the user's go.sum holds a line for a
// third-party module that no go.sum of the repository holds: one the go
// command took without a hash the repository checked (a line the
// checksum database would have had to give, online).
func checkSums(t *testing.T, path string, seed map[string]bool, mods []module) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || seed[line] || slices.ContainsFunc(mods, func(m module) bool { return m.Path == f[0] }) {
			continue
		}
		t.Errorf("go.sum line %q is in none of the repository's go.sum files (its hash was not checked)", line)
	}
}

// checkVersions fails the test unless the user's module requires every
// library module at the published version.
func checkVersions(t *testing.T, u *user, mods []module, version string) {
	args := []string{"list", "-m"}
	for _, m := range mods {
		if library(m) {
			args = append(args, m.Path)
		}
	}
	out := u.run("go", args...)
	for _, p := range args[2:] {
		if !strings.Contains(out, p+" "+version+"\n") {
			t.Errorf("go list -m: want %s %s, got:\n%s", p, version, out)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(u.dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gomod), "replace") {
		t.Errorf("the service's go.mod holds a replace line:\n%s", gomod)
	}
	head, _, _ := strings.Cut(string(gomod), ")")
	t.Logf("the service's go.mod begins:\n%s)", head)
}
