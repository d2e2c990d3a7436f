package releasetest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
)

// module is one of the repository's modules.
type module struct {
	Dir  string // relative to the repository's root, "." for the root module
	Path string // module path
}

// repoModules runs scripts/modules.sh (the one place that finds the modules
// by their go.mod files and checks that they agree) and returns the modules
// and the version at which they require each other.
func repoModules(root string) ([]module, string, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "scripts", "modules.sh"), args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("scripts/modules.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run("check"); err != nil {
		return nil, "", err
	}
	version, err := run("version")
	if err != nil {
		return nil, "", err
	}
	list, err := run("list")
	if err != nil {
		return nil, "", err
	}
	var mods []module
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		dir, p, ok := strings.Cut(line, " ")
		if !ok {
			return nil, "", fmt.Errorf("scripts/modules.sh list: bad line %q", line)
		}
		mods = append(mods, module{Dir: dir, Path: p})
	}
	return mods, strings.TrimSpace(version), nil
}

// file is one file of a module: its path in the module and its content.
type file struct {
	rel  string
	data []byte
}

// publish writes every module into proxy, laid out as a GOPROXY=file://proxy
// serves it (<escaped path>/@v/list, <version>.info, .mod and .zip), and
// returns the version it published them at: testVersion(release, hash of
// every module's files), their go.mod files requiring each other at that
// version instead of at release (the edit of a release, docs/releasing.md).
// A module's files are those git tracks or would track (untracked files
// that no .gitignore excludes: uncommitted work is tested too), as in the
// working tree, less the directories of nested modules; the zip follows the
// module zip rules (every name under path@version/, regular files only),
// and the go command checks the rest when it extracts it.
//
// With version set, it publishes at that version instead (Publish).
func publish(root, proxy string, mods []module, release, version string) (string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return "", fmt.Errorf("listing the repository's files with git: %v (the test needs a git checkout)", err)
	}
	paths := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	slices.Sort(paths)
	paths = slices.Compact(paths) // git lists a file with merge conflicts once per stage
	h := sha256.New()
	files := make([][]file, len(mods))
	for i, m := range mods {
		if files[i], err = moduleFiles(root, m, mods, paths); err != nil {
			return "", fmt.Errorf("%s: %v", m.Path, err)
		}
		for _, f := range files[i] {
			fmt.Fprintf(h, "%s/%s %d\n", m.Path, f.rel, len(f.data))
			h.Write(f.data)
		}
	}
	if version == "" {
		version = testVersion(release, h.Sum(nil))
	}
	for i, m := range mods {
		if err := writeModule(proxy, m, files[i], version, retag(mods, release, version)); err != nil {
			return "", fmt.Errorf("%s: %v", m.Path, err)
		}
	}
	return version, nil
}

// writeModule writes module m's list, .info, .mod and .zip at version into
// proxy, with its go.mod edited by edit.
func writeModule(proxy string, m module, files []file, version string, edit func([]byte) []byte) error {
	dir := filepath.Join(proxy, filepath.FromSlash(escapePath(m.Path)), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var gomod []byte
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		data := f.data
		if f.rel == "go.mod" {
			data = edit(data)
			gomod = data
		}
		w, err := zw.Create(m.Path + "@" + version + "/" + f.rel)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	info, _ := json.Marshal(map[string]string{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	list, err := listed(filepath.Join(dir, "list"), version)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list": list, version + ".info": info,
		version + ".mod": gomod, version + ".zip": buf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// listed returns the proxy's list file at path with version added: a
// directory kept for users (Publish) keeps every version published into it.
func listed(path, version string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	return []byte(strings.Join(versions, "\n") + "\n"), nil
}

// moduleFiles reads the files of module m: those of paths (slash paths
// relative to root) under its directory and not under a nested module's.
func moduleFiles(root string, m module, mods []module, paths []string) ([]file, error) {
	inside := func(f, dir string) bool { return dir == "." || strings.HasPrefix(f, dir+"/") }
	var files []file
	for _, p := range paths {
		if !inside(p, m.Dir) || nestedIn(p, m, mods, inside) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, p))
		if os.IsNotExist(err) {
			continue // deleted in the working tree: not part of it
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue // module zips hold regular files only
		}
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, err
		}
		files = append(files, file{rel: strings.TrimPrefix(p, m.Dir+"/"), data: data})
	}
	if !slices.ContainsFunc(files, func(f file) bool { return f.rel == "go.mod" }) {
		return nil, fmt.Errorf("no go.mod among the files git lists under %s", m.Dir)
	}
	return files, nil
}

// retag returns the edit of a go.mod that changes its requirements on our
// modules at version from to version to.
func retag(mods []module, from, to string) func([]byte) []byte {
	ours := func(p string) bool {
		return slices.ContainsFunc(mods, func(m module) bool { return m.Path == p })
	}
	return func(gomod []byte) []byte {
		lines := strings.SplitAfter(string(gomod), "\n")
		for i, line := range lines {
			f := strings.Fields(line)
			if len(f) > 0 && f[0] == "require" {
				f = f[1:]
			}
			if len(f) >= 2 && ours(f[0]) && f[1] == from {
				lines[i] = strings.Replace(line, f[0]+" "+from, f[0]+" "+to, 1)
			}
		}
		return []byte(strings.Join(lines, ""))
	}
}

// nestedIn reports whether file f belongs to a module nested in m.
func nestedIn(f string, m module, mods []module, inside func(f, dir string) bool) bool {
	for _, o := range mods {
		if o.Dir != m.Dir && inside(o.Dir+"/", m.Dir) && inside(f, o.Dir) {
			return true
		}
	}
	return false
}

// escapePath is the module proxy's case encoding of a module path: each
// upper-case letter becomes '!' and its lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return path.Clean(b.String())
}
