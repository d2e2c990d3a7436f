package zookeeper

import (
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/zkname"
)

// validatePath checks a znode path given to a recipe (zkname.CheckPath):
// absolute, not the root, no trailing slash, no empty, "." or ".."
// segments, no characters ZooKeeper refuses, valid UTF-8, outside the
// reserved /zookeeper subtree, and no segment named like a queue node or a
// recipe's record, markerName (the error's Err is then ErrReservedName).
// The error is a *PathError matching recipe.ErrInvalidPath. Chroots are
// checked by it too.
func validatePath(p string) error { return pathError(p, zkname.CheckPath) }

// validateSequentialPath checks the path p of a sequential create (what
// fencezk's Register.Apply lets a caller send): as validatePath does, and
// that no name the server can make of it (p followed by a sequence) is in
// the node-name grammar (zkname.CheckSequentialPath).
func validateSequentialPath(p string) error { return pathError(p, zkname.CheckSequentialPath) }

// pathError is the *PathError of check's verdict on p, or nil.
func pathError(p string, check func(string) (string, bool)) error {
	why, reserved := check(p)
	switch {
	case why == "":
		return nil
	case reserved:
		return &PathError{Path: p, Reason: why, Err: ErrReservedName}
	}
	return &PathError{Path: p, Reason: why}
}

// splitServers turns a server list into plain host:port entries and a chroot.
// Each element may itself be a comma-separated connect string; a chroot suffix
// ("host:port/app") may appear on any element and must be the same wherever it
// appears. A chroot of "/" means none. An entry without a port gets
// port 2181; a port that is not a number in 1..65535 is recipe.ErrBadOption.
func splitServers(servers []string) (hosts []string, chroot string, err error) {
	for _, s := range servers {
		for _, h := range strings.Split(s, ",") {
			h = strings.TrimSpace(h)
			if h == "" {
				continue
			}
			if i := strings.IndexByte(h, '/'); i >= 0 {
				c := h[i:]
				h = h[:i]
				if c == "/" {
					c = ""
				}
				if c != "" {
					if err := validatePath(c); err != nil {
						return nil, "", err
					}
				}
				if chroot != "" && c != "" && c != chroot {
					return nil, "", &PathError{Path: c, Reason: "conflicting chroot suffixes " + chroot + " and " + c}
				}
				if c != "" {
					chroot = c
				}
			}
			if h == "" {
				return nil, "", &PathError{Path: s, Reason: "server entry without host:port"}
			}
			if h, err = withDefaultPort(h); err != nil {
				return nil, "", err
			}
			hosts = append(hosts, h)
		}
	}
	return hosts, chroot, nil
}
