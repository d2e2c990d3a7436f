package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// A Rule kept in the queue directory's data (a semaphore whose limit is
// stored with it): every listing the core loop decides on is a
// getChildren2, whose reply carries the directory's Stat from the same
// moment as the names; the Rule that decides it is the one of the data at
// that Stat's data version, or of a later version (docs/design.md#a-rule-from-the-directorys-data).

// RuleFromDirData declares that the queue's Rule is kept in its
// directory's data: f turns the data (nil when there is none) into the
// Rule, or into an error that fails the Acquire, TryAcquire or Await that
// asked, its node given up. f is asked again whenever a listing shows the
// directory's data version (or the directory itself) changed, after one
// getData of the directory; a waiter also watches the directory's data.
// Each Rule f returns must keep the Rule contract; the re-list skip is
// off. f must be pure and cheap; NewQueue's rule may then be nil.
func RuleFromDirData(f func(data []byte) (Rule, error)) QueueOption {
	return func(c *ruleContract) {
		if f != nil {
			c.fromDir = &dirRule{f: f}
		}
	}
}

// dirRule is a queue's RuleFromDirData: f, and the Rule of the directory's
// data last read.
type dirRule struct {
	f    func(data []byte) (Rule, error)
	last atomic.Pointer[dirRuled]
}

// dirRuled is the answer of f on the directory's data at one version of
// one incarnation of the directory: the queue's contract with that Rule,
// or f's error.
type dirRuled struct {
	at  dirVersion
	c   *ruleContract
	err error
}

// dirVersion is what a listing's Stat tells of the directory's data: the
// directory's czxid (which incarnation) and its data version.
type dirVersion struct {
	czxid   int64
	version int32
}

// contractAt returns the contract that decides a listing taken when the
// directory was at dv: the queue's own, or, declared RuleFromDirData, the
// one of the data last read if it was read at dv, else of the data read
// now (getData, after the listing: a version at least as new as dv's). A
// missing directory is zk.ErrNoNode: the caller's node went with it.
func (q *Queue) contractAt(ctx context.Context, dv dirVersion) (*ruleContract, error) {
	dr := q.contract.fromDir
	if dr == nil {
		return &q.contract, nil
	}
	if r := dr.last.Load(); r != nil && r.at == dv {
		return r.c, r.err
	}
	d := &q.d
	var data []byte
	var rst zk.Stat
	err := d.s.req.retryOwn(ctx, &lostSends{size: d.reqSize}, func(ctx context.Context) (err error) {
		data, rst, err = d.s.getData(ctx, d.adir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, zk.ErrNoNode
	}
	if err != nil {
		return nil, d.wrap("get", err)
	}
	r := &dirRuled{at: dirVersion{czxid: rst.Czxid, version: rst.Version}}
	rule, err := q.contract.ruleOf(data)
	if err != nil {
		r.err = err
	} else {
		c := q.contract
		c.rule, c.firstHolds = rule, false
		r.c = &c
	}
	dr.last.Store(r)
	return r.c, r.err
}

// ruleOf asks the queue's RuleFromDirData for the Rule of data. A nil Rule,
// or f's panic, is recipe.ErrBadOption (a bug in the recipe, as a Rule's
// panic is: decide).
func (c *ruleContract) ruleOf(data []byte) (rule Rule, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: the rule of %s's data panicked: %v", recipe.ErrBadOption, shortpath.Of(c.dir), v)
		}
	}()
	rule, err = c.fromDir.f(data)
	if err == nil && rule == nil {
		err = fmt.Errorf("%w: no rule for %s's data", recipe.ErrBadOption, shortpath.Of(c.dir))
	}
	return rule, err
}

// getData reads path's data and Stat (no watch).
func (s *Session) getData(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	// data and st are written by the reply, which may come after an error
	// return (ctx ended): read only on success.
	var data []byte
	st := new(zk.Stat)
	c := &ownCall{parse: func(b []byte) bool {
		var ok bool
		data, *st, ok = zkwire.ParseGetData(b)
		return ok
	}}
	if err := s.do(ctx, c, zkwire.OpGetData, path, zkwire.Bool(false)); err != nil {
		return nil, zk.Stat{}, err
	}
	return data, *st, nil
}
