package releasetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// testVersion returns the version the test publishes release at: below
// release, so never taken for it. One version for every run: the runs take
// turns (lockModCache) and each removes it from the module cache before
// and after, so a run never sees another's copy, and the build cache,
// which keys our packages by their directory in the module cache and
// their files' content, finds those of an unchanged package compiled.
func testVersion(release string) string { return release + "-releasetest" }

// cleanModCache removes what the go command put in the module cache for
// our modules at version: the extracted directories and the download
// cache's files, then the directories left empty.
func cleanModCache(modcache string, mods []module, version string) error {
	var errs []string
	for _, m := range mods {
		esc := escapePath(m.Path)
		dir := filepath.Join(modcache, filepath.FromSlash(esc)+"@"+version)
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err.Error())
		}
		pruneEmpty(modcache, filepath.Dir(dir))
		dl := filepath.Join(modcache, "cache", "download", filepath.FromSlash(esc), "@v")
		names, _ := filepath.Glob(filepath.Join(dl, version+".*"))
		for _, name := range names {
			if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err.Error())
			}
		}
		if err := dropListed(filepath.Join(dl, "list"), version); err != nil {
			errs = append(errs, err.Error())
		}
		pruneEmpty(modcache, dl)
	}
	if errs != nil {
		return fmt.Errorf("cleaning the module cache: %s", strings.Join(errs, "; "))
	}
	return nil
}

// dropListed removes version from a download cache list file, and the file
// if nothing else is listed.
func dropListed(list, version string) error {
	data, err := os.ReadFile(list)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []string
	for _, v := range strings.Fields(string(data)) {
		if v != version {
			keep = append(keep, v)
		}
	}
	if keep == nil {
		return os.Remove(list)
	}
	return os.WriteFile(list, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// pruneEmpty removes dir and its parents up to (not including) top while
// they are empty.
func pruneEmpty(top, dir string) {
	for dir != top && strings.HasPrefix(dir, top+string(filepath.Separator)) {
		if os.Remove(dir) != nil { // not empty, or gone
			return
		}
		dir = filepath.Dir(dir)
	}
}
