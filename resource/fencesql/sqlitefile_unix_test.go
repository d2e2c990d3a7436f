//go:build unix

package fencesql_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteFileModes: a database file or directory that every user, or
// a group other than the process's, can write is refused (anyone who can
// write them can write the tokens, or replace the file, or plant a
// -journal that SQLite plays back into it); one writable by the process's
// own group (umask 002) is not. On main each was accepted.
func TestSQLiteFileModes(t *testing.T) {
	db, dir := oneConn(t)
	newFence(t, db) // trusted with the modes the test made (0644, 0755)
	path := filepath.Join(dir, "test.db")
	for _, c := range []struct {
		path    string
		mode    os.FileMode
		refused bool
	}{
		{path, 0o666, true},
		{path, 0o664, false}, // the file's group is the process's
		{dir, 0o777, true},
		{dir, 0o1777, true}, // sticky, like /tmp: others can still create test.db-journal
		{dir, 0o775, false},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(c.path, c.mode); err != nil {
			t.Fatal(err)
		}
		if c.refused {
			attackSQLite(t, newUnchecked(t, db), true, nil)
		} else if err := newUnchecked(t, db).Do(ctxT(t), "r", 1, nil); err != nil {
			t.Errorf("%s with mode %v: %v", c.path, c.mode, err)
		}
		if err := os.Chmod(c.path, fi.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}
