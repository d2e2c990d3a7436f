package pgtest

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// findBinDir returns the directory of initdb and postgres.
func findBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres found in /usr/lib/postgresql/*/bin or PATH")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// credential returns the user to run the server as (postgres when running as
// root, nil otherwise) and gives it dir.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 30 {
			break
		}
	}
	if b.Len() == 0 || (b.String()[0] >= '0' && b.String()[0] <= '9') {
		return "t" + b.String()
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// withDatabase returns dsn (a postgres:// URL) with its database replaced.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("pgtest: %s must be a postgres:// URL", EnvDSN)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// databaseOf returns the database named by dsn (a postgres:// URL): a
// name as NewDatabase makes them (lower-case letters, digits, _), which
// can be written unquoted. It is not sanitized: sanitize truncates to 30
// bytes, and DROP DATABASE IF EXISTS of a truncated name dropped nothing
// (a test named with more than 30 characters left its database, and the
// roles it granted to could not be dropped).
func databaseOf(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || len(u.Path) < 2 {
		return "", fmt.Errorf("pgtest: no database in %q", redacted(dsn))
	}
	name := u.Path[1:]
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return "", fmt.Errorf("pgtest: database %q is not one pgtest made", name)
		}
	}
	return name, nil
}

// redacted returns dsn with its password, if any, replaced by "xxxxx", for
// messages.
func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(an unparsable DSN)"
	}
	return u.Redacted()
}
