package zookeeper

import (
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A queue directory made by someone else keeps its own ACL, whatever
// WithACL says: with a restrictive WithACL, a create of a queue node is
// sent only into a directory that passed the directory rule (acl.go,
// checkDirACL) or that this Session made itself with its ACL. The ACL is
// read (one getAcl) before the first create in a directory and the answer
// kept for the Session; the default open ACL skips all of it.

// ErrUntrustedDir is matched (errors.Is) by the error of an Acquire,
// TryAcquire, or any other create of a queue node, when the Session's
// WithACL keeps CREATE, DELETE or ADMIN from others but the queue's
// directory exists with an ACL that grants one of them to an identity
// WithACL does not grant it to (someone made the directory first), or
// that does not grant the Session READ, CREATE and DELETE. Nothing was
// created. It matches recipe.ErrNoPermission too (recipe.Permanent): the
// directory must be removed, or given the ACL, by its owner. The message
// names the directory and the rule its ACL breaks (schemes, users,
// permissions; never a digest's hash).
var ErrUntrustedDir = errors.New("recipe: untrusted directory")

// dirACLError is the error, matching ErrUntrustedDir and
// recipe.ErrNoPermission, for a queue directory whose ACL breaks the
// directory rule.
type dirACLError struct {
	path   string // the directory, as the recipe was given it (below the chroot)
	reason string // the rule it breaks: schemes, users, permissions; never a digest's hash
}

func (e *dirACLError) Error() string {
	return fmt.Sprintf("recipe: untrusted directory %q: %s", e.path, e.reason)
}

// Unwrap makes it match ErrUntrustedDir and recipe.ErrNoPermission.
func (e *dirACLError) Unwrap() []error { return []error{ErrUntrustedDir, recipe.ErrNoPermission} }

// maxTrustedDirs bounds a Session's cache of trusted directories: past it
// the cache starts over (a directory is then checked again, one getAcl).
const maxTrustedDirs = 4096

// dirTrust is a Session's cache of the directories (server paths) that
// passed the rule or that it made with its ACL.
type dirTrust struct {
	once sync.Once
	on   bool // the rule applies (dirRuleApplies of WithACL)
	mu   sync.Mutex
	ok   map[string]struct{}
}

// enabled reports whether the rule applies under acl, the Session's.
func (t *dirTrust) enabled(acl []zk.ACL) bool {
	t.once.Do(func() { t.on = dirRuleApplies(acl) })
	return t.on
}

func (t *dirTrust) trusted(dir string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.ok[dir]
	return ok
}

func (t *dirTrust) trust(dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ok == nil || len(t.ok) >= maxTrustedDirs {
		t.ok = make(map[string]struct{})
	}
	t.ok[dir] = struct{}{}
}

// forget drops dir: it was found missing, so the next one may be another's.
func (t *dirTrust) forget(dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ok, dir)
}

// checkedCreate is createOnce into a directory the rule allows: with the
// rule on, an unchecked directory is checked first (checkDir), and one
// that the create finds missing is forgotten.
func (q *qdir) checkedCreate(prefix string, data []byte, anchor *anchorSpec) (string, error) {
	t := &q.s.dirs
	if !t.enabled(q.s.cfg.acl) {
		return q.createOnce(prefix, data, anchor)
	}
	if !t.trusted(q.adir) {
		if err := q.checkDir(); err != nil {
			return "", err
		}
	}
	p, err := q.createOnce(prefix, data, anchor)
	if errors.Is(err, zk.ErrNoNode) {
		t.forget(q.adir)
	}
	return p, err
}

// checkDir reads the queue directory's ACL and applies the rule; a missing
// directory is made (makeOrCheckDir).
func (q *qdir) checkDir() error {
	acl, _, err := q.s.conn.GetACL(q.adir)
	if errors.Is(err, zk.ErrNoNode) {
		return q.makeOrCheckDir()
	}
	if err != nil {
		return err
	}
	return q.judgeDir(acl)
}

// makeOrCheckDir makes the queue directory (and its missing ancestors)
// with the Session's ACL, and trusts it; one that exists after all is
// checked (a race with whoever made it).
func (q *qdir) makeOrCheckDir() error {
	q.s.dirs.forget(q.adir)
	for try := 0; ; try++ {
		made, err := q.s.makePath(q.adir, q.s.cfg.acl)
		if err != nil {
			return err
		}
		if made {
			q.s.dirs.trust(q.adir)
			return nil
		}
		acl, _, err := q.s.conn.GetACL(q.adir)
		if errors.Is(err, zk.ErrNoNode) && try < 10 {
			continue // removed again since: make it
		}
		if err != nil {
			return err
		}
		return q.judgeDir(acl)
	}
}

// judgeDir applies the rule to acl, the queue directory's, and trusts the
// directory if it passes.
func (q *qdir) judgeDir(acl []zk.ACL) error {
	if why := checkDirACL(acl, q.s.cfg.acl, q.s.cfg.auth); why != "" {
		return &dirACLError{path: q.dir, reason: why}
	}
	q.s.dirs.trust(q.adir)
	return nil
}
