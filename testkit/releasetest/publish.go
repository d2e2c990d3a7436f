package releasetest

import (
	"fmt"
	"os"
	"path/filepath"
)

// Publish writes every module of the repository at root (its working
// tree, as the release test publishes it) into dir, a file-based module
// proxy: GOPROXY=file://<dir> serves them. It publishes at version, or with
// version "" at the test's version V-releasetest.h<hash of the files>
// (testVersion: below the release V the modules require each other at,
// named after the content), and returns the version. It adds to what dir
// already holds (dir is created if needed), so that a user can try the
// modules before a release (docs/releasing.md, "Trying it before a
// release"; scripts/modules.sh proxy).
func Publish(root, dir, version string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	mods, release, err := repoModules(root)
	if err != nil {
		return "", err
	}
	v, err := publish(root, abs, mods, release, version)
	if err != nil {
		return "", fmt.Errorf("publishing into %s: %w", abs, err)
	}
	return v, nil
}

// testSuffix begins the pre-release part of the test's versions.
const testSuffix = "-releasetest.h"

// testVersion returns the version at which the test publishes the tree
// whose files hash to sum, for release: below release, so never taken for
// it, and named after the content. The go command takes what the module
// cache holds at a version to be immutable (it caches its index of a
// module's packages by directory alone), so another content must never
// appear there under the same version; the same tree, though, gets the
// same directories and so finds its packages compiled in the build cache.
func testVersion(release string, sum []byte) string {
	return fmt.Sprintf("%s%s%x", release, testSuffix, sum[:6])
}
