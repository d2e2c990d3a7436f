package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// join creates the caller's node and returns its Ticket. With fs (an
// Acquire's), the create goes out as create2 with the listing right behind
// it (see fast.go). A failed join leaves no node behind.
func (q *Queue) join(ctx context.Context, kind string, data []byte, anchor *anchorSpec, keep bool, fs *fastStart) (*Ticket, error) {
	if !slices.Contains(q.kinds, kind) {
		return nil, fmt.Errorf("%w: node kind %q is not one of %q", recipe.ErrBadOption, kind, q.kinds)
	}
	if err := q.checkCreate(kind, data, anchor); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	ep, err := q.s.current()
	if err != nil {
		return nil, err
	}
	guid := newGUID()
	pipe := q.pipeListing(fs, guid, kind)
	name, err := q.create(ctx, guid, kind, data, anchor)
	reply, usable := pipe.finish(name, err)
	if err != nil {
		// The create may have been applied: remove whatever carries our GUID.
		q.deleteOwned(ctx, cleanupItem{dir: q.adir, guid: guid, owner: q.s.ID(), sends: lostSends{size: q.reqSize}}, false)
		if isConnErr(err) && ep.ctx.Err() != nil && !errors.Is(err, recipe.ErrSessionLost) {
			// The connection failed because the session it served is
			// lost (expired, or presumed expired at its deadline): say so,
			// so that a caller can join again on the next session.
			err = errorf("%w (%w)", context.Cause(ep.ctx), err)
		}
		return nil, err
	}
	if n, ok := parseNodeName(name, q.kinds); ok {
		q.noteSeq(kind, n.Seq)
	}
	t := &Ticket{q: q, name: name, path: q.adir + "/" + name, ep: ep, owner: ep.id, keep: keep, rep: q.reps[kind]}
	if anchor != nil {
		t.token = anchor.token
	}
	// Which session owns the node? The create was sent after ep was current;
	// if ep is still current and not lost, ep's session created it (a new
	// session is reported before any request is sent on its connection).
	cur, err := q.s.current()
	if err != nil {
		return nil, err // closed: the node went with the session
	}
	if cur != ep || ep.ctx.Err() != nil {
		fs.discard(q.s)
		if err := t.adopt(ctx, cur); err != nil {
			return nil, err
		}
		return t, nil
	}
	if usable && reply.EphemeralOwner == ep.id {
		q.earlyLease(ctx, fs, t, reply)
	} else {
		fs.dropChildSlot(q.s)
	}
	return t, nil
}

// adopt moves t to the session cur after its create was sent under an
// earlier one: the node must exist and belong to cur, or t is abandoned.
// The check is retried across connection losses (the new session's
// connection may still be coming up when a thawed process gets here): a
// connection error is not an answer.
func (t *Ticket) adopt(ctx context.Context, cur *epoch) error {
	s := t.q.s
	t.ep, t.owner = cur, cur.id
	var ok bool
	var st *zk.Stat
	err := s.retry(ctx, t.q.reqSize, func() (err error) {
		ok, st, err = s.conn.Exists(t.path)
		return err
	})
	if err == nil && (!ok || st.EphemeralOwner != cur.id) {
		err = fmt.Errorf("%w: node created under a session that is gone", recipe.ErrSessionLost)
	}
	if err != nil {
		t.abandon(ctx)
		return t.q.wrap("create", err)
	}
	return nil
}

// create sends the protected ephemeral sequential create and returns the
// child name. After a connection loss that may have applied it, the node
// is looked up by GUID (findByGUID) before the create is sent again.
func (q *Queue) create(ctx context.Context, guid, kind string, data []byte, anchor *anchorSpec) (string, error) {
	s := q.s
	var prefix string
	if anchor != nil {
		prefix = q.adir + "/" + nodePrefix(guid, kind, true, anchor.seq)
	} else {
		prefix = q.adir + "/" + nodePrefix(guid, kind, false, 0)
	}
	unknown := false // an earlier attempt may have been applied
	var name string
	// A caller that stops waiting (ctx ends, case C4) closes the gate: no
	// create of this attempt is sent after that, and the one in flight, if
	// any, is waited for (abandonBudget), so that the caller's search by
	// GUID finds whatever landed. One still in flight after the budget (the
	// connection is down) is undone by late when it lands.
	g := &createGate{}
	q.pending.add()
	late := func(err error) {
		defer q.pending.done()
		if g.settled() {
			return // the caller's own clean-up ran after the last create
		}
		owner := s.ID()
		switch {
		case err == nil && name != "":
			q.deleteOwned(context.Background(), cleanupItem{path: q.adir + "/" + name, owner: owner}, false)
		case err != nil && isConnErr(err):
			q.deleteOwned(context.Background(), cleanupItem{dir: q.adir, guid: guid, owner: owner, sends: lostSends{size: q.reqSize}}, false)
		}
	}
	err, abandoned := s.retryLate(ctx, &lostSends{size: max(q.reqSize, q.createSize(kind, data, anchor))}, func() error {
		if unknown {
			n, err := q.findByGUID(guid)
			if err != nil || n != "" {
				name = n
				return err
			}
		}
		for attempt := 0; ; attempt++ {
			if !g.enter() {
				return errCreateStopped
			}
			p, err := q.createOnce(prefix, data, anchor)
			if errors.Is(err, zk.ErrNoNode) && attempt < 10 {
				// The directory is missing, or was deleted between our ensure
				// and this create (case C18): create it and try again, in
				// the same pass of the gate, so that a directory made for a
				// caller who left gets its node (and is reaped once empty: a
				// container that never had a child stays).
				if err = q.ensureDir(); err == nil {
					p, err = q.createOnce(prefix, data, anchor)
				}
			}
			g.exit()
			if err == nil {
				name = path.Base(p)
				return nil
			}
			if errors.Is(err, zk.ErrNoNode) && attempt < 10 {
				continue
			}
			if isConnErr(err) && !errors.Is(err, zk.ErrNoServer) {
				unknown = true
			}
			return err
		}
	}, late)
	if abandoned {
		g.close(s.quit, abandonBudget)
	} else {
		q.pending.done()
	}
	if err != nil {
		return "", q.wrap("create", err)
	}
	return name, nil
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

// close stops the creates and waits up to budget (or until quit is closed)
// for the one in flight to return.
func (g *createGate) close(quit <-chan struct{}, budget time.Duration) {
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
	case <-quit:
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
func (q *Queue) createOnce(prefix string, data []byte, anchor *anchorSpec) (string, error) {
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
func (q *Queue) findByGUID(guid string) (string, error) {
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

// ensureDir creates the queue directory and its missing ancestors: see
// ensurePath.
func (q *Queue) ensureDir() error {
	return q.s.ensurePath(q.adir, q.s.cfg.acl)
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
	flags, create := int32(zk.FlagContainer), s.conn.CreateContainer
	if p == s.chroot || !strings.HasPrefix(p, s.chroot+"/") {
		flags, create = 0, s.conn.Create
	}
	_, err := create(p, nil, flags, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.ensurePath(path.Dir(p), acl); err != nil {
			return err
		}
		_, err = create(p, nil, flags, acl)
	}
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	what := "directory"
	if !strings.HasPrefix(p, s.chroot+"/") {
		what = "chroot znode"
	}
	return fmt.Errorf("creating the %s %s: %w", what, shortpath.Of(p), err)
}

// ensureDir is zkside.Session.EnsureDir: dir below the chroot ("/" for the
// chroot itself) and its missing ancestors, as ensurePath makes them,
// retrying on connection loss until ctx ends.
func (s *Session) ensureDir(ctx context.Context, dir string, acl []zk.ACL) error {
	if dir != "/" {
		if err := validatePath(dir); err != nil {
			return err
		}
	}
	p := s.abs(dir)
	if dir == "/" {
		if s.chroot == "" {
			return nil
		}
		p = s.chroot
	}
	if acl == nil {
		acl = s.cfg.acl
	}
	return s.retry(ctx, len(p)+pathSlack, func() error { return opErr("create", dir, s.ensurePath(p, acl)) })
}
