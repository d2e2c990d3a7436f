package main

import (
	"context"
	"errors"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zkname"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// roleForeign is the role inspect gives a node of a kind no recipe of the
// module uses ("_c_<guid>-foo-0000000001": another program's, a newer
// version's, or one planted to block the path): every recipe refuses the
// directory while it is there (recipe.ErrMixedRecipes); inspect shows it.
const roleForeign = "foreign"

// lister lists a path's participants for inspect, foreign nodes included:
// a recipe fails on them, the diagnosis tool shows them.
type lister struct {
	s    *zookeeper.Session
	path string // the recipe path
	abs  string // its znode path, with the chroot
	q    *zookeeper.Queue
}

// newLister returns a lister of path, whose znode is abs; its errors are
// NewQueue's (no ZooKeeper operation).
func newLister(s *zookeeper.Session, path, abs string) (*lister, error) {
	l := &lister{s: s, path: path, abs: abs}
	return l, l.queue(allKinds)
}

// queue makes l's queue over kinds. AllowsAnchors: the path may hold a
// read-write lock's anchored nodes, whose longer names the queue's
// requests are sized for.
func (l *lister) queue(kinds []string) (err error) {
	l.q, err = zookeeper.NewQueue(l.s, l.path, kinds, zookeeper.FirstHolds, zookeeper.AllowsAnchors())
	return err
}

// participants lists the participants in queue order. A node of a kind l's
// queue does not know makes the queue refuse the listing: l then reads the
// kinds present and lists again with them added (a few times, should
// another kind appear in between).
func (l *lister) participants(ctx context.Context) ([]zookeeper.Participant, error) {
	for try := 0; ; try++ {
		ps, err := l.q.Participants(ctx)
		if !errors.Is(err, recipe.ErrMixedRecipes) || try == 3 {
			return ps, err
		}
		children, _, err := l.s.Conn().Children(l.abs)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		kinds := slices.Clone(allKinds)
		for _, c := range children {
			if k := zkname.Kind(c); k != "" && !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
		if err := l.queue(kinds); err != nil {
			return nil, err
		}
	}
}

// foreign reports whether kind is no recipe's of the module.
func foreign(kind string) bool { return !slices.Contains(allKinds, kind) }
