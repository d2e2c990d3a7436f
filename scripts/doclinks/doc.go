// Package doclinks holds one test: every relative link of the repository's
// Markdown files (README.md, CHANGELOG.md, docs/) names a file that exists
// and, with a #fragment, a heading of that file; every docs/*.md path and
// docs/*.md#fragment named in a Go file (doc comments, tests that read a
// document) resolves the same way. Run it with `go test ./scripts/doclinks`.
package doclinks
