package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The protected create: one node of a queue, with its attempt's GUID in its
// name, sent so that a lost reply never leaves a second node and a caller
// who left never leaves one (docs/design.md#acquisition, "After a lost
// reply" and "A cancelled or failed Acquire"; cases C2 to C5, C18).

// create sends the protected ephemeral sequential create of a node of
// kind carrying data (anchored to anchor, if set) and returns the child
// name: see protectedCreate. On error, maybe reports whether a node of the
// attempt may exist (a create whose reply was lost, or one its caller
// stopped waiting for), which the caller must look for by GUID; when it is
// false every create was answered with a refusal or never sent (a create
// the server refused, for an ACL say, created nothing).
func (q *qdir) create(ctx context.Context, guid, kind string, data []byte, anchor *anchorSpec, pipe *createPipe) (name string, maybe bool, err error) {
	c := &protectedCreate{q: q, guid: guid, data: data, anchor: anchor, pipe: pipe,
		sends: lostSends{size: max(q.reqSize, q.createSize(kind, data, anchor))}}
	if anchor != nil {
		c.prefix = q.adir + "/" + nodePrefix(guid, kind, true, anchor.seq)
	} else {
		c.prefix = q.adir + "/" + nodePrefix(guid, kind, false, 0)
	}
	return c.run(ctx)
}

// protectedCreate is one attempt's create, retried across connection
// losses: after a loss that may have applied it (a lost reply) the node is
// looked up by GUID before the create is sent again, and adopted only if
// the current session owns it (C2, C3); a missing directory is created and
// the create sent again in the same pass (C18); a caller that stops waiting
// (C4) closes the gate, so that no create is sent after that and the one in
// flight is waited for (while the connection is up, up to the cleanup
// timeout: cleaner.whileUp) before the caller's own search by GUID, and one
// still in flight after that is undone by late when it lands.
// name and unknown are written by the attempts, on the request's worker,
// and read by the caller only once retryLate returned without abandoning.
type protectedCreate struct {
	q      *qdir
	guid   string
	prefix string // the name sent: ZooKeeper appends the sequence
	data   []byte
	anchor *anchorSpec
	sends  lostSends
	gate   createGate
	pipe   *createPipe // an Acquire's: the first create is fastcreate.go's

	unknown bool   // an earlier attempt may have been applied
	name    string // the child created, once known
}

// run makes the attempts until one succeeds, fails for good, or the caller
// leaves; the create is counted in the queue's pending work (Drain) until
// nothing of it is left in flight. maybe is create's.
func (c *protectedCreate) run(ctx context.Context) (name string, maybe bool, err error) {
	q := c.q
	q.pending.add()
	done, abandoned := false, false
	if c.pipe != nil {
		done, abandoned, err = c.first(ctx, c.pipe)
	}
	if !done {
		err, abandoned = q.s.req.retryLate(ctx, &c.sends, c.attempt, c.late)
	}
	if abandoned {
		wctx, done := q.s.cleaner.whileUp(ctx)
		c.gate.close(wctx.Done(), q.s.cleaner.timeout())
		done()
	} else {
		q.pending.done()
	}
	if err != nil {
		// c.unknown may be read only when the attempts are over.
		return "", abandoned || c.unknown, q.wrap("create", err)
	}
	return c.name, false, nil
}

// attempt is one pass of the retry loop.
func (c *protectedCreate) attempt() error {
	if c.unknown {
		n, err := c.q.findByGUID(c.guid)
		if err != nil || n != "" {
			c.name = n
			return err
		}
	}
	for try := 0; ; try++ {
		if !c.gate.enter() {
			return errCreateStopped
		}
		p, err := c.q.checkedCreate(c.prefix, c.data, c.anchor)
		if errors.Is(err, zk.ErrNoNode) && try < 10 {
			// The directory is missing, or was deleted between our ensure
			// and this create: create it and try again, in the same pass
			// of the gate, so that a directory made for a caller who left
			// gets its node (and is reaped once empty: a container that
			// never had a child stays).
			if err = c.q.ensureDir(); err == nil {
				p, err = c.q.checkedCreate(c.prefix, c.data, c.anchor)
			}
		}
		c.gate.exit()
		if err == nil {
			c.name = path.Base(p)
			return nil
		}
		if errors.Is(err, zk.ErrNoNode) && try < 10 {
			continue
		}
		if isConnErr(err) && !errors.Is(err, zk.ErrNoServer) {
			c.unknown = true
		}
		return err
	}
}

// late gets the outcome of the attempt its caller stopped waiting for, and
// deletes what it may have created, unless the caller's own clean-up ran
// after the last create (the gate settled).
func (c *protectedCreate) late(err error) {
	q := c.q
	defer q.pending.done()
	if c.gate.settled() {
		return
	}
	owner := q.s.ID()
	switch {
	case err == nil && c.name != "":
		q.deleteOwned(context.Background(), cleanupItem{path: q.adir + "/" + c.name, owner: owner}, false)
	case err != nil && isConnErr(err):
		q.deleteOwned(context.Background(), cleanupItem{dir: q.adir, guid: c.guid, owner: owner, sends: lostSends{size: q.reqSize}}, false)
	}
}

// createGate is how a create's caller that stopped waiting keeps the
// worker from sending another create of the attempt (enter fails once the
// gate is closed) and waits for the one in flight (exit).
type createGate struct {
	mu     sync.Mutex
	closed bool          // the caller left: no more creates
	out    bool          // a create is in flight
	done   bool          // close saw no create in flight, or saw it return
	exited chan struct{} // made by close to wait for the create in flight
}

// errCreateStopped is the outcome of a create not sent because its caller left.
var errCreateStopped = errors.New("recipe: create not sent: its caller left")

func (g *createGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out = !g.closed
	return g.out
}

func (g *createGate) exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out = false
	if g.exited != nil {
		close(g.exited)
		g.exited = nil
	}
}

// close stops the creates and waits up to budget (or until stop is
// closed) for the one in flight to return.
func (g *createGate) close(stop <-chan struct{}, budget time.Duration) {
	g.mu.Lock()
	g.closed = true
	if !g.out {
		g.done = true
		g.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	g.exited = ch
	g.mu.Unlock()
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-ch:
		g.mu.Lock()
		g.done = true
		g.mu.Unlock()
	case <-t.C:
	case <-stop:
	}
}

// settled reports that close returned with no create in flight: every
// create of the attempt was answered before its caller's search by GUID,
// which runs after close, so late has nothing to undo.
func (g *createGate) settled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// createOnce sends one create of prefix; an anchored node is created in a
// multi with a check that its anchor exists, so it takes a place that was
// never given to anyone else.
func (q *qdir) createOnce(prefix string, data []byte, anchor *anchorSpec) (string, error) {
	s := q.s
	if anchor == nil {
		return s.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, s.cfg.acl)
	}
	res, err := s.conn.Multi(&zk.CheckVersionRequest{Path: anchor.path, Version: -1},
		&zk.CreateRequest{Path: prefix, Data: data, Acl: s.cfg.acl, Flags: zk.FlagEphemeral | zk.FlagSequence})
	if errors.Is(err, zk.ErrNoNode) {
		return "", errorf("%w (%w: the anchor %s is gone)", recipe.ErrLeaseLost, recipe.ErrNodeDeleted, path.Base(anchor.path))
	}
	if err == nil && len(res) == 2 {
		return res[1].String, nil
	}
	return "", err
}

// findByGUID looks for a node of ours carrying guid, after a sync so that
// the server answering has seen every write the leader committed. Only a
// node whose ephemeral owner is the current session is adopted (case C3);
// extra copies, if any, are deleted.
func (q *qdir) findByGUID(guid string) (string, error) {
	s := q.s
	if _, err := s.conn.Sync(q.adir); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil
		}
		return "", err
	}
	children, _, err := s.conn.Children(q.adir)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	cur := s.ID()
	var mine []NodeName
	for _, c := range children {
		if !strings.HasPrefix(c, protectedPrefix+guid+"-") {
			continue
		}
		ok, st, err := s.conn.Exists(q.adir + "/" + c)
		if err != nil {
			return "", err
		}
		if ok && st.EphemeralOwner == cur {
			if n, ok := parseNodeName(c, q.kinds); ok {
				n.czxid = st.Czxid
				mine = append(mine, n)
			}
		}
	}
	if len(mine) == 0 {
		return "", nil
	}
	slices.SortFunc(mine, func(a, b NodeName) int { return cmp.Compare(a.czxid, b.czxid) }) // creation order, also at the sequence limit
	for _, extra := range mine[1:] {
		q.deleteOwned(context.Background(), cleanupItem{path: q.adir + "/" + extra.Name, owner: cur}, false)
	}
	return mine[0].Name, nil
}
