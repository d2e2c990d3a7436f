package zookeeper

import (
	"strings"
	"unicode/utf8"
)

// validatePath checks a znode path given to a recipe: it must be absolute,
// not the root, have no trailing slash, no empty, "." or ".." segments, no
// characters ZooKeeper refuses, be valid UTF-8, stay out of the reserved
// /zookeeper subtree, and have no segment named like a queue node or a
// recipe's record, MarkerName (reservedSegment; the error's Err is then
// ErrReservedName). The error is a
// *PathError matching recipe.ErrInvalidPath. Chroots are checked by it too:
// a chroot is a directory in the server's tree like any other.
func validatePath(p string) error {
	bad := func(reason string) error { return &PathError{Path: p, Reason: reason} }
	switch {
	case p == "":
		return bad("empty")
	case p[0] != '/':
		return bad("not absolute (must start with /)")
	case p == "/":
		return bad("the root znode cannot be a recipe directory")
	case strings.HasSuffix(p, "/"):
		return bad("trailing slash")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad("empty segment (//)")
		case ".", "..":
			return bad("relative segment " + seg)
		}
	}
	for _, r := range p {
		// ZooKeeper's PathUtils rejects these (it works on UTF-16, so
		// characters beyond U+FFFF arrive as refused surrogates).
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return bad("contains a character ZooKeeper refuses")
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return bad("the /zookeeper subtree is reserved by ZooKeeper")
	}
	if why := reservedSegment(p); why != "" {
		return &PathError{Path: p, Reason: why, Err: ErrReservedName}
	}
	return nil
}

// validateSequentialPath checks the path p of a sequential create (what
// fencezk's Register.Apply lets a caller send): as validatePath does, and
// that no name the server can make of it (p followed by a sequence,
// seqShapes) is in the node-name grammar: "/P/_c_<guid>-lock-" would
// become a lock node of P.
func validateSequentialPath(p string) error {
	if err := validatePath(p); err != nil {
		return err
	}
	for _, s := range seqShapes {
		if why := reservedSegment(p + s); why != "" {
			return &PathError{Path: p, Reason: "a sequential create there makes names like " + s + ": " + why, Err: ErrReservedName}
		}
	}
	return nil
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
