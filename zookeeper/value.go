package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkwire"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ValueNode is one persistent znode read and written whole with versions:
// the engine of package value (Curator's SharedValue), for any recipe that
// keeps one value in one node. Write is a versioned setData, or a create
// of the missing node (its missing parents made as containers, as the
// recipes make their directories); a write whose reply was lost is settled
// by reading the node again, never guessed. Read syncs first, and tells of
// a missing node a zxid at which it was missing. Observe follows the node
// with the Session's shared one-shot watches. Safe for concurrent use.
type ValueNode struct {
	s    *Session
	path string // as given (below the chroot)
	full string // with the chroot
}

// NodeValue is a ValueNode's content at one point of the server's order.
type NodeValue struct {
	// Exists reports whether the node exists.
	Exists bool
	// Data is the node's data (nil when it does not exist). Callers must
	// not modify it.
	Data []byte
	// Version is the node's data version (ZooKeeper's Stat.Version: 0
	// after its create); -1 when it does not exist.
	Version int32
	// Zxid is the node's mzxid when it exists; when it does not, a zxid at
	// which it did not (the pzxid of its nearest existing ancestor, read
	// with that ancestor's children). A later state has a larger Zxid.
	Zxid int64
}

// NewValueNode returns the value node at path (below the chroot) on s. It
// sends nothing. Errors: a *PathError (recipe.ErrInvalidPath; also
// recipe.ErrTooLarge for a path whose requests would exceed the packet
// limit) for a path the recipes refuse (package doc, "Paths");
// recipe.ErrBadOption for a nil s; recipe.ErrSessionClosed.
func NewValueNode(s *Session, path string) (*ValueNode, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil session", recipe.ErrBadOption)
	}
	if s.isClosed() {
		return nil, recipe.ErrSessionClosed
	}
	if err := validatePath(path); err != nil {
		return nil, err
	}
	n := &ValueNode{s: s, path: path, full: s.abs(path)}
	if need := len(n.full) + pathSlack; need > s.limit.max {
		return nil, &PathError{Path: path, Reason: fmt.Sprintf("too long: its requests need %d bytes, over the session's packet limit of %d bytes", need, s.limit.max), Err: recipe.ErrTooLarge}
	}
	return n, nil
}

// Path returns the node's path (below the chroot).
func (n *ValueNode) Path() string { return n.path }

// CheckData reports whether the node may carry data: nil, or an error
// matching recipe.ErrTooLarge when its create or setData (with the
// Session's ACL), or the getData reply that reads it back, would be over
// the packet limit (WithMaxPacket). It sends nothing.
func (n *ValueNode) CheckData(data []byte) error {
	if err := n.s.limit.checkRequest(false, []any{&zk.CreateRequest{Path: n.full, Data: data, Acl: n.s.cfg.acl}}); err != nil {
		return err
	}
	return n.s.limit.checkRequest(false, []any{&zk.SetDataRequest{Path: n.full, Data: data}})
}

// Read returns the node as the server holds it after a sync (so at least
// as new as every write completed before the call), retrying connection
// losses until ctx ends. ZooKeeper operations: sync, getData; for a
// missing node, getChildren of its parent (of its nearest existing
// ancestor), which gives the Zxid. Errors: *recipe.OpError;
// recipe.ErrSessionClosed; ctx's cause.
func (n *ValueNode) Read(ctx context.Context) (NodeValue, error) {
	return n.read(ctx, true)
}

// read is Read; sync false reads without the sync (a watcher's reads,
// which never go back in the session's order anyway).
func (n *ValueNode) read(ctx context.Context, sync bool) (NodeValue, error) {
	if ctx.Err() != nil {
		return NodeValue{}, context.Cause(ctx)
	}
	var v NodeValue
	err := n.s.req.retry(ctx, len(n.full)+pathSlack, func() (err error) {
		v, err = n.readOnce(sync)
		return err
	})
	if err != nil {
		return NodeValue{}, n.wrap("get", err)
	}
	return v, nil
}

// maxReads bounds the reads of a node that keeps appearing and vanishing
// between its getData and its parent's listing.
const maxReads = 10

// readOnce is one attempt of read.
func (n *ValueNode) readOnce(sync bool) (NodeValue, error) {
	c := n.s.conn
	if sync {
		if _, err := c.Sync(n.full); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return NodeValue{}, err
		}
	}
	for range maxReads {
		data, st, err := c.Get(n.full)
		if err == nil {
			return NodeValue{Exists: true, Data: data, Version: st.Version, Zxid: st.Mzxid}, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return NodeValue{}, err
		}
		zxid, there, err := n.absentAt()
		if err != nil || !there {
			return NodeValue{Version: -1, Zxid: zxid}, err
		}
	}
	return NodeValue{}, fmt.Errorf("%s appeared and vanished %d times while it was read", n.path, maxReads)
}

// absentAt returns a zxid at which the node did not exist: the pzxid of
// its nearest existing ancestor, whose listing (read with its Stat in one
// reply) lacks the next name on the way down; then nothing of the path
// was created since that zxid. there reports that the listing shows the
// way down after all (made since the getData): read again.
func (n *ValueNode) absentAt() (zxid int64, there bool, _ error) {
	for child := n.full; child != "/"; child = path.Dir(child) {
		names, st, err := n.s.conn.Children(path.Dir(child))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		return st.Pzxid, slices.Contains(names, path.Base(child)), nil
	}
	return 0, false, errors.New("the root znode is missing")
}

// Write writes data if the node's data version is still version, or with
// version -1 creates the node (its missing parents first, as containers),
// and returns the node as written. Connection losses are retried until ctx
// ends; after a lost reply the node is read first, and what it holds says
// whether the write applied (valueWrite). Operations: setData or create,
// then getData. Errors: recipe.ErrConflict in a *recipe.OpError (not at
// version: missing, or present for -1; nothing written); an *recipe.OpError
// saying it is unconfirmed (it may have applied and been overwritten);
// recipe.ErrTooLarge, recipe.ErrBadOption (version < -1) before any send;
// recipe.ErrSessionClosed; ctx's cause (after a send, Read tells).
func (n *ValueNode) Write(ctx context.Context, data []byte, version int32) (NodeValue, error) {
	if version < -1 {
		return NodeValue{}, fmt.Errorf("%w: data version %d", recipe.ErrBadOption, version)
	}
	if err := n.CheckData(data); err != nil {
		return NodeValue{}, err
	}
	if ctx.Err() != nil {
		return NodeValue{}, context.Cause(ctx)
	}
	w := &valueWrite{n: n, data: data, version: version}
	size := zkwire.CreateFrame(len(n.full), len(data), n.s.cfg.acl)
	err := n.s.req.retry(ctx, size, w.attempt)
	switch {
	case err == nil:
		return w.result, nil
	case errors.Is(err, errValueConflict):
		return NodeValue{}, &recipe.OpError{Op: w.op(), Path: n.path, Err: fmt.Errorf("%w: %w", recipe.ErrConflict, err)}
	}
	return NodeValue{}, n.wrap(w.op(), err)
}

// Delete deletes the node whatever its data version (a barrier's Remove);
// a node already missing is no error, so a delete whose reply was lost is
// simply sent again. Connection losses are retried until ctx ends.
// Operation: delete. Errors: *recipe.OpError (recipe.ErrNoPermission for an
// ACL refusal, zk.ErrNotEmpty for a node with children);
// recipe.ErrSessionClosed; ctx's cause.
func (n *ValueNode) Delete(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	err := n.s.req.retry(ctx, len(n.full)+pathSlack, func() error {
		err := n.s.conn.Delete(n.full, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
	if err != nil {
		return n.wrap("delete", err)
	}
	return nil
}

// errValueConflict is the verdict of a write refused because the node is
// not at the version it expected; errValueUnconfirmed, of a write whose
// reply was lost and whose node was written since by someone else, so that
// whether it applied cannot be told.
var (
	errValueConflict    = errors.New("the node is not at the expected version")
	errValueUnconfirmed = errors.New("unconfirmed: the reply was lost and the node was written again since (Read tells what it holds)")
)

// valueWrite is one Write, retried across connection losses. Its fields
// are written by the attempts, one at a time. After a lost reply it sends a
// sync and reads the node (getData) before anything else: holding data at the version this write makes (version+1;
// 0 for a create), the write is taken as applied (another writer's write
// of the same bytes over the same version is indistinguishable, and leaves
// the node as this one would); still at version (missing, for a create),
// it is sent again; at version+1 with other data, it conflicts; past it,
// or deleted, it may have applied and been overwritten: unconfirmed
// (errValueUnconfirmed), not a conflict, which promises that nothing was
// written. After a create the node is read back for its Zxid (its mzxid
// while its data version is 0, else its czxid; 0 if it is gone already).
type valueWrite struct {
	n       *ValueNode
	data    []byte
	version int32 // -1: create

	unknown bool      // an attempt may have been applied: settle before sending again
	created bool      // the create was applied: only read it back
	result  NodeValue // once applied
}

// op names the write's request.
func (w *valueWrite) op() string {
	if w.version < 0 {
		return "create"
	}
	return "set"
}

// attempt is one pass of Write's retry loop.
func (w *valueWrite) attempt() error {
	if w.created {
		return w.readBack()
	}
	if w.unknown {
		cur, err := w.n.readOnce(true)
		if err != nil {
			return err
		}
		switch {
		case cur.Exists && cur.Version == w.version+1 && bytes.Equal(cur.Data, w.data):
			w.result = cur
			return nil
		case cur.Exists && cur.Version == w.version+1:
			// Another write made the version this one would have: this one
			// was refused (applied, it would have made that version first).
			return fmt.Errorf("%w (after a lost reply: version %d holds another write)", errValueConflict, cur.Version)
		case cur.Exists != (w.version >= 0) || cur.Exists && cur.Version != w.version:
			// Past the version this write would have made, or gone: it may
			// have applied and been overwritten (or deleted) since.
			return fmt.Errorf("%w (after a lost reply: found version %d, exists %t)", errValueUnconfirmed, cur.Version, cur.Exists)
		}
		w.unknown = false // still as expected: the write was not applied
	}
	if w.version < 0 {
		return w.create()
	}
	st, err := w.n.s.conn.Set(w.n.full, w.data, w.version)
	if err == nil {
		w.result = NodeValue{Exists: true, Data: w.data, Version: st.Version, Zxid: st.Mzxid}
		return nil
	}
	return w.failed(err)
}

// failed classifies a refused or lost write.
func (w *valueWrite) failed(err error) error {
	switch {
	case isConnErr(err) && !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, errNotConnected):
		w.unknown = true
		return err
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode) && w.version >= 0, errors.Is(err, zk.ErrNodeExists):
		return fmt.Errorf("%w (%w)", errValueConflict, err)
	}
	return err
}

// create sends the create of the missing node, making its missing parents
// (as containers below the chroot) when the server says they are missing.
func (w *valueWrite) create() error {
	s := w.n.s
	var err error
	for try := 0; try < maxReads; try++ {
		_, err = s.conn.Create(w.n.full, w.data, 0, s.cfg.acl)
		if !errors.Is(err, zk.ErrNoNode) {
			break
		}
		if perr := s.ensurePath(path.Dir(w.n.full), s.cfg.acl); perr != nil {
			return perr
		}
	}
	if err != nil {
		return w.failed(err)
	}
	w.created = true
	return w.readBack()
}

// readBack reads the node this write created, for its Zxid.
func (w *valueWrite) readBack() error {
	data, st, err := w.n.s.conn.Get(w.n.full)
	w.result = NodeValue{Exists: true, Data: w.data, Version: 0}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		return err
	case st.Version == 0 && bytes.Equal(data, w.data):
		w.result.Zxid = st.Mzxid
	default:
		w.result.Zxid = st.Czxid
	}
	return nil
}

// wrap is the error of a failed operation op on the node.
func (n *ValueNode) wrap(op string, err error) error {
	var oe *recipe.OpError
	var pe *PathError
	if errors.As(err, &oe) || errors.As(err, &pe) || errors.Is(err, recipe.ErrSessionClosed) || errors.Is(err, recipe.ErrTooLarge) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return opErr(op, n.path, err)
}
