package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
)

// The queue directories and their parents: created as containers below the
// chroot, bottom-up, only when a create finds them missing (case C18).

// ensureDir creates the queue directory and its missing ancestors: see
// ensurePath. With a restrictive WithACL the directory, if it turned out
// to exist, must pass the directory rule (diracl.go): this is the path of
// a create that found the directory missing, so the one found now may be
// another's.
func (q *qdir) ensureDir() error {
	if !q.s.dirs.enabled(q.s.cfg.acl) {
		return q.s.ensurePath(q.adir, q.s.cfg.acl)
	}
	return q.makeOrCheckDir()
}

// ensurePath creates the znode p (a server path, chroot included) and its
// missing ancestors below the chroot as container znodes (removed by the
// server once empty, Curator's creatingParentContainersIfNeeded), bottom-up:
// it starts at p and walks up only on NoNode, so it never needs permissions
// above the first existing ancestor. A missing chroot (and its missing
// ancestors) is created persistent: it is an application's root and must
// not vanish when empty. NodeExists is success. An error names the znode
// it could not create.
func (s *Session) ensurePath(p string, acl []zk.ACL) error {
	_, err := s.makePath(p, acl)
	return err
}

// makePath is ensurePath that also reports whether this call created p
// itself (with acl): false when p existed already.
func (s *Session) makePath(p string, acl []zk.ACL) (made bool, _ error) {
	flags, create := int32(zk.FlagContainer), s.conn.CreateContainer
	if p == s.chroot || !strings.HasPrefix(p, s.chroot+"/") {
		flags, create = 0, s.conn.Create
	}
	_, err := create(p, nil, flags, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.ensurePath(path.Dir(p), acl); err != nil {
			return false, err
		}
		_, err = create(p, nil, flags, acl)
	}
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return err == nil, nil
	}
	what := "directory"
	if !strings.HasPrefix(p, s.chroot+"/") {
		what = "chroot znode"
	}
	return false, fmt.Errorf("creating the %s %s: %w", what, shortpath.Of(p), err)
}

// ensureDir is zkside.Session.EnsureDir: dir below the chroot ("/" for the
// chroot itself) and its missing ancestors, as ensurePath makes them,
// retrying on connection loss until ctx ends. made reports whether dir was
// created by this call (by makePath; false if a lost answer hid it).
func (s *Session) ensureDir(ctx context.Context, dir string, acl []zk.ACL) (made bool, _ error) {
	if dir != "/" {
		if err := validatePath(dir); err != nil {
			return false, err
		}
	}
	p := s.abs(dir)
	if dir == "/" {
		if s.chroot == "" {
			return false, nil
		}
		p = s.chroot
	}
	if acl == nil {
		acl = s.cfg.acl
	}
	err := s.req.retry(ctx, len(p)+pathSlack, func() error {
		var err error
		made, err = s.makePath(p, acl)
		return opErr("create", dir, err)
	})
	return made, err
}
