package fencezk

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// A register's mark is only as safe as two ACLs: the register's own (WRITE
// lowers the mark, ADMIN grants WRITE) and its parent's (ZooKeeper checks a
// delete or a create against the parent only: DELETE removes the register,
// and a missing register reads as token zero; CREATE then re-makes it with
// any value). A register this Register creates gets its ACL; one that
// exists already, made by anyone earlier, keeps its own. So, with an ACL
// that keeps any of these from others, the first write of a Register
// reads both ACLs and applies zookeeper's directory rule to them
// (zkside.Session.ACLRule), as the recipes do to their directories.

// regGuard are the permissions on the register that let their holder
// change it other than through a fenced write: all but READ.
const regGuard = zk.PermWrite | zk.PermAdmin | zk.PermCreate | zk.PermDelete

// dirGuard are those on its parent: DELETE and CREATE reset the mark,
// ADMIN grants them. WRITE sets the parent's own data, unused.
const dirGuard = zk.PermCreate | zk.PermDelete | zk.PermAdmin

// regNeed is what the register must grant this session for a write.
const regNeed = zk.PermRead | zk.PermWrite

// ACLError is the error of a Write or an Apply (nothing written) when the
// Register's ACL keeps WRITE, CREATE, DELETE or ADMIN from others but its
// znode, which exists already, grants one of them to an identity that ACL
// does not grant it to, or does not grant this session READ and WRITE; or
// when its parent grants CREATE, DELETE or ADMIN so. Whoever holds such a
// grant could lower the mark, or delete it (a missing register reads as
// token zero). It matches zookeeper.ErrUntrustedDir (the same rule as the
// recipes' directories) and recipe.ErrNoPermission (recipe.Permanent): the
// znode's owner must remove it or set its ACL; credentials do not help.
type ACLError struct {
	Register string // the register's path, below the chroot
	Path     string // the znode whose ACL breaks the rule: the register or its parent ("/": the chroot)
	Reason   string // the rule it breaks: schemes, users, permissions; never a digest's hash
}

// Error implements error.
func (e *ACLError) Error() string {
	if e.Path == e.Register {
		return fmt.Sprintf("fencezk: untrusted register %q: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("fencezk: register %q: untrusted parent %q: %s", e.Register, e.Path, e.Reason)
}

// Unwrap returns zookeeper.ErrUntrustedDir.
func (e *ACLError) Unwrap() error { return zookeeper.ErrUntrustedDir }

// Is makes an *ACLError match recipe.ErrNoPermission.
func (e *ACLError) Is(target error) bool { return target == recipe.ErrNoPermission }

// errVanished tells write to read the register again: a znode vet was
// about to check is gone since.
var errVanished = errors.New("fencezk: the register changed during its ACL check")

// keepsFromOthers reports whether the Register's ACL keeps any of regGuard
// from others: if not (the default open ACL), no znode can break the rule
// and nothing is read.
func (r *Register) keepsFromOthers() bool {
	return r.side.ACLRule(zk.WorldACL(regGuard), r.acl, regGuard, 0) != ""
}

// vet applies the rule before a guarded Register writes a register it has
// not checked: one missing, or whose czxid is not the one it trusts (it
// was deleted and made again since). It checks the parent (made first if
// missing, as the recipes make their directories; one this call made is
// trusted) and, if exists, the register, and then trusts the register's
// czxid. Errors: an *ACLError; errVanished; ZooKeeper's (nothing was
// written).
func (r *Register) vet(ctx context.Context, exists bool) error {
	dir := path.Dir(r.path) // "/" is the chroot (or the root)
	acl, _, err := r.readACL(path.Dir(r.full), dir)
	if errors.Is(err, zk.ErrNoNode) && !exists {
		var made bool
		if made, err = r.side.EnsureDir(ctx, dir, r.acl); err != nil || made {
			return wrapParents(r.path, err)
		}
		acl, _, err = r.readACL(path.Dir(r.full), dir)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return errVanished
	}
	if err != nil {
		return err
	}
	if why := r.side.ACLRule(acl, r.acl, dirGuard, 0); why != "" {
		return &ACLError{Register: r.path, Path: dir, Reason: why}
	}
	if !exists {
		return nil // its create, into the parent just checked, makes it ours
	}
	acl, st, err := r.readACL(r.full, r.path)
	if errors.Is(err, zk.ErrNoNode) {
		return errVanished
	} else if err != nil {
		return err
	}
	if why := r.side.ACLRule(acl, r.acl, regGuard, regNeed); why != "" {
		return &ACLError{Register: r.path, Path: r.path, Reason: why}
	}
	r.trusted.Store(st.Czxid)
	return nil
}

// made trusts the register this Register just created (with its ACL, in
// the parent vet checked): its czxid is read back, as a create does not
// return it. If that read fails, the next write checks the register.
func (r *Register) made() {
	if ok, st, err := r.s.Conn().Exists(r.full); err == nil && ok {
		r.trusted.Store(st.Czxid)
	}
}

// readACL returns the ACL and Stat of the znode full (shown as p in an
// error).
func (r *Register) readACL(full, p string) ([]zk.ACL, *zk.Stat, error) {
	acl, st, err := r.s.Conn().GetACL(full)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, nil, fmt.Errorf("fencezk: reading the ACL of %s: %w", shortpath.Of(p), err)
	}
	return acl, st, err
}

// wrapParents says that err, if any, came from creating the parents of p.
func wrapParents(p string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("fencezk: creating the parents of %s: %w", shortpath.Of(p), err)
}
