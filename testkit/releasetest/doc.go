// Package releasetest checks that the repository's modules can be used the
// way README's Install section says, by a module outside the repository
// with no replace line. Its test publishes every module (found by its
// go.mod file, scripts/modules.sh) at the version they require each other
// at into a file-based module proxy in a temporary directory, then, in a
// fresh module there, runs README's `go get` and `go install` lines
// verbatim, builds and runs a program that takes a lock on a real
// ZooKeeper and on memlock, and runs the installed command line tool.
// docs/releasing.md runs it before tagging a release. Its one exported
// function, Publish, is that publishing, for users who try the modules
// before a release (command publish, run by `scripts/modules.sh proxy`);
// the test publishes through that command too.
package releasetest
