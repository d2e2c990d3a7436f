package zookeeper

import "github.com/zkrecipes/zkrecipes/recipe"

// NodeLease is a recipe.Lease that names its node: every lease of this module's
// ZooKeeper recipes (mutex, read-write lock, semaphore, latch, election)
// is one. Path is what tools and tests use to find the grant's znode.
type NodeLease interface {
	recipe.Lease
	// Path returns the lease's znode, relative to the session's chroot.
	Path() string
}

var _ NodeLease = (*lease)(nil)
