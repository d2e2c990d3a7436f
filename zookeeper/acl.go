package zookeeper

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// ErrUnusableACL is Connect's error (it matches recipe.ErrBadOption too)
// for a WithACL that does not grant the Session itself READ, CREATE and
// DELETE. The recipes create their directories with that ACL, and
// ZooKeeper lets a client delete a node only with DELETE on its parent:
// without it a failed TryAcquire, a cancelled waiter or a Release would
// leave its node in the directory until the session ends, and without
// CREATE or READ nothing could be locked at all.
var ErrUnusableACL = errors.New("recipe: the ACL does not let this session create, list and delete its own nodes")

// needPerms are the permissions the Session needs on a recipe directory:
// CREATE for its nodes, READ to list the queue, DELETE to remove its nodes.
const needPerms = zk.PermCreate | zk.PermRead | zk.PermDelete

// checkACL returns an error matching ErrUnusableACL and recipe.ErrBadOption
// when the entries of acl that a session with the credentials auth holds
// do not add up to needPerms. What the Session holds is known for two
// schemes: world:anyone (everyone) and digest (a WithAuth("digest",
// "user:password") whose hash is the entry's). Entries of other schemes
// (auth, ip, x509, sasl, ...) depend on the server's view of the
// connection and are taken as held: the server refuses a create that they
// do not allow, and a refused create leaves nothing behind.
func checkACL(acl []zk.ACL, auth []authInfo) error {
	var held int32
	for _, e := range acl {
		if holds(e, auth) {
			held |= e.Perms
		}
	}
	if missing := needPerms &^ held; missing != 0 {
		return errorf("%w: %w: WithACL %s grants this session no %s permission on the nodes it creates",
			recipe.ErrBadOption, ErrUnusableACL, describeACL(acl), permNames(missing))
	}
	return nil
}

// holds reports whether a session with the credentials auth holds the
// identity of the entry e (see checkACL).
func holds(e zk.ACL, auth []authInfo) bool {
	switch e.Scheme {
	case "world":
		return e.ID == "anyone"
	case "digest":
		for _, a := range auth {
			if a.scheme != "digest" {
				continue
			}
			user, pass, ok := bytes.Cut(a.auth, []byte(":"))
			if ok && zk.DigestACL(0, string(user), string(pass))[0].ID == e.ID {
				return true
			}
		}
		return false
	}
	return true
}

// describeACL names the entries of acl by scheme, user and permissions,
// never a digest's hash.
func describeACL(acl []zk.ACL) string {
	parts := make([]string, 0, len(acl))
	for _, e := range acl {
		parts = append(parts, identity(e)+":"+permNames(e.Perms))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// identity names the entry e's identity as scheme:id, a digest's without
// its hash.
func identity(e zk.ACL) string {
	id := e.ID
	if e.Scheme == "digest" {
		id, _, _ = strings.Cut(id, ":")
	}
	return e.Scheme + ":" + id
}

// permNames spells perms as ZooKeeper's CLI does (cdrwa).
func permNames(perms int32) string {
	var b strings.Builder
	for _, p := range []struct {
		bit  int32
		name byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if perms&p.bit != 0 {
			b.WriteByte(p.name)
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// The directory rule. The recipes create their nodes in a directory that
// may exist already, made by anyone with CREATE on its parent, with an ACL
// of their choosing: ZooKeeper checks a create or a delete against the
// parent's ACL only, so whoever that ACL grants CREATE could plant nodes
// among the contenders, DELETE delete theirs (a holder's included), ADMIN
// grant either. With a WithACL that keeps these from others, an existing
// directory must keep them from others too (diracl.go applies the rule).

// guardPerms are the permissions on a directory that let their holder
// change its contenders: CREATE, DELETE, and ADMIN (which grants them).
const guardPerms = zk.PermCreate | zk.PermDelete | zk.PermAdmin

// dirRuleApplies reports whether the directory rule can refuse anything
// under acl: not when acl grants world:anyone every guardPerm (the default
// open ACL), since no directory can then grant anyone more.
func dirRuleApplies(acl []zk.ACL) bool {
	var world int32
	for _, e := range acl {
		if e.Scheme == "world" && e.ID == "anyone" {
			world |= e.Perms
		}
	}
	return guardPerms&^world != 0
}

// checkDirACL applies the directory rule to dir, the ACL of an existing
// directory, for a Session with WithACL acl and credentials auth. It
// returns the rule dir breaks, or "": every entry of dir may grant its
// identity only guardPerms that acl grants that identity too, and dir must
// grant this session needPerms as Connect requires of acl (else a failed
// attempt's node would stay). The reason names schemes, users and
// permissions, never a digest's hash.
func checkDirACL(dir, acl []zk.ACL, auth []authInfo) string {
	return checkNodeACL(dir, acl, auth, guardPerms, needPerms)
}

// checkNodeACL is the directory rule for any znode someone else may have
// made (resource/fencezk's register and its parent use it through
// zkside.Session.ACLRule): every entry of node may grant its identity only
// those of guard that acl grants that identity too, and node must grant
// this session need. It returns the rule node breaks, or "".
func checkNodeACL(node, acl []zk.ACL, auth []authInfo, guard, need int32) string {
	var held int32
	for _, e := range node {
		if extra := e.Perms & guard &^ grantedTo(e, acl, auth); extra != 0 {
			return fmt.Sprintf("its ACL grants %s %s%s, which WithACL %s does not", identity(e), permNames(extra), digestNote(e, acl), describeACL(acl))
		}
		if holds(e, auth) {
			held |= e.Perms
		}
	}
	if missing := need &^ held; missing != 0 {
		return fmt.Sprintf("its ACL %s grants this session no %s permission", describeACL(node), permNames(missing))
	}
	return ""
}

// grantedTo returns the permissions acl grants the identity of the entry e
// of a directory's ACL: those of a world:anyone entry, of an entry of the
// same scheme and id, and of an "auth" entry (which the server turns into
// the creating session's authenticated identities) when e is one the
// Session holds (holds; not world, not ip, which "auth" never yields).
func grantedTo(e zk.ACL, acl []zk.ACL, auth []authInfo) int32 {
	var perms int32
	for _, a := range acl {
		switch {
		case a.Scheme == "world" && a.ID == "anyone",
			a.Scheme == e.Scheme && a.ID == e.ID,
			a.Scheme == "auth" && e.Scheme != "world" && e.Scheme != "ip" && holds(e, auth):
			perms |= a.Perms
		}
	}
	return perms
}

// digestNote tells apart, for a directory's entry e, a digest of a user
// that WithACL names with another password, or one whose hash the server
// hid (it shows "user:x" to a session without ADMIN on the node).
func digestNote(e zk.ACL, acl []zk.ACL) string {
	if e.Scheme != "digest" {
		return ""
	}
	if strings.HasSuffix(e.ID, ":x") {
		return " (the server hides the digest's password hash from a session without ADMIN on the znode: it cannot be told from an impostor's)"
	}
	for _, a := range acl {
		if a.Scheme == "digest" && identity(a) == identity(e) {
			return " (with another password)"
		}
	}
	return ""
}
