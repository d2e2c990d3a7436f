//go:build unix

package fencesql

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkFiles refuses a SQLite database file path whose file, -wal, -shm or
// -journal file or directory is owned by a user other than the process's
// (or root), or writable by every user or by a group other than the
// process's: such a user can write the database's pages directly, or,
// through the directory, replace the file or plant a -journal that SQLite
// plays back into the database at its next open (a "hot journal"). path ""
// (an in-memory or temporary database) has no file.
func checkFiles(path string) error {
	if path == "" {
		return nil
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal", filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) && p != path {
			continue
		}
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		switch perm := fi.Mode().Perm(); {
		case int(st.Uid) != os.Geteuid() && st.Uid != 0:
			return fmt.Errorf("%s is owned by uid %d, not by this process's user (uid %d) or root", p, st.Uid, os.Geteuid())
		case perm&0o002 != 0:
			return fmt.Errorf("%s is writable by every user (mode %v)", p, perm)
		case perm&0o020 != 0 && int(st.Gid) != os.Getegid():
			return fmt.Errorf("%s is writable by group gid %d, not this process's group (mode %v)", p, st.Gid, perm)
		}
	}
	return nil
}
