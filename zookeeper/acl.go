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
		id := e.ID
		if e.Scheme == "digest" {
			id, _, _ = strings.Cut(id, ":")
		}
		parts = append(parts, fmt.Sprintf("%s:%s:%s", e.Scheme, id, permNames(e.Perms)))
	}
	return "[" + strings.Join(parts, " ") + "]"
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
