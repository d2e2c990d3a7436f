package releasetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tryingSettings returns the exported settings of the sh block of
// docs/releasing.md's "Trying it before a release" section (NAME to
// value), and checks that they are the two the test relies on: GOPROXY
// with a file:// directory first, GONOSUMDB naming the root module path
// (which covers every module of ours).
func tryingSettings(t *testing.T, root string, mods []module) map[string]string {
	data, err := os.ReadFile(filepath.Join(root, "docs", "releasing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## Trying it before a release\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, block, ok2 := strings.Cut(sec, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/releasing.md has no sh block in a section \"## Trying it before a release\"")
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		name, val, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || !strings.HasPrefix(line, "export ") {
			t.Fatalf("docs/releasing.md's try block: %q is not `export NAME=value`", line)
		}
		env[name] = val
	}
	if !strings.HasPrefix(env["GOPROXY"], "file://") || env["GONOSUMDB"] != mods[0].Path || len(env) != 2 {
		t.Fatalf("docs/releasing.md's try block sets %q, want GOPROXY=file://DIR,... and GONOSUMDB=%s", env, mods[0].Path)
	}
	return env
}
