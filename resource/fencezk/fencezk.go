// Package fencezk fences data kept in ZooKeeper: a [Register] is a znode
// holding a value and the highest fencing token accepted for it, written
// with a versioned setData (or a multi) so that a write with a token lower
// than the stored one never lands, also when writers race.
//
// Each write reads the znode (its token and data version), refuses a lower
// token, and writes with the version it read: if anyone wrote in between,
// ZooKeeper refuses the write (bad version) and the write starts over from
// a new read, so the comparison is always made against the token actually
// replaced. [Register.Apply] extends the same check to other znodes: their
// creates, sets and deletes go in one multi with the register's versioned
// setData, and land only with a token at least as high as the register's.
//
// What it protects: the register's znode and the znodes written through
// Apply. What it cannot: effects elsewhere (give those an idempotency key),
// and a register whose znode is deleted, since the high-water mark goes
// with it (never delete a register's znode while tokens of the old mark
// may still be in use). Nor a client that the register's ACL lets set its
// data, or its parent's lets delete it: the register takes the Session's
// ACL (zookeeper.WithACL), and with a restrictive one an existing register
// that grants others more is refused (ACLError, acl.go).
package fencezk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// ErrNotRegister is returned (wrapped) when the znode's data is not in the
// register's format: another program's znode, or a path typo.
var ErrNotRegister = errors.New("fencezk: znode is not a fenced register")

// ErrBadOp is returned (wrapped) by Apply for an operation that is not a
// *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or
// *zk.CheckVersionRequest, or whose path is invalid or the register's own.
var ErrBadOp = errors.New("fencezk: bad operation")

// Value is a register's content.
type Value struct {
	Token   fence.Token // the highest token accepted (zero: none yet)
	Data    []byte      // the value of the last accepted write
	Version int32       // the znode's data version; -1 if it does not exist
}

// Register is a fenced register in the znode at one path. The znode holds
// "token=<decimal token>\n" followed by the value's bytes; an empty znode
// is the empty register (token zero). It is safe for concurrent use.
type Register struct {
	s    *zookeeper.Session
	side zkside.Session
	path string // as given, below the session's chroot
	full string // with the chroot
	acl  []zk.ACL

	guarded bool         // acl keeps some of regGuard from others: vet before writing (acl.go)
	trusted atomic.Int64 // the czxid of the register that passed vet or that this Register made; 0: none

	// OnStale, if set before first use, is called with every write it
	// refuses for a stale token: wire recipe.Metrics.StaleRejected here.
	OnStale func(*fence.StaleError)
}

// Option configures a Register.
type Option func(*Register)

// WithACL sets the ACL of the znodes the register creates (itself and
// missing parents; default: the Session's, zookeeper.WithACL's). An ACL
// that keeps WRITE, CREATE, DELETE or ADMIN from others also makes the
// first write check a register (and its parent) that exists already
// against it: see ACLError. Znodes written through Apply carry the ACL of
// their own request.
func WithACL(acl []zk.ACL) Option { return func(r *Register) { r.acl = acl } }

// New returns the register at path, relative to the session's chroot like
// every recipe path. The first write creates the znode (persistent) with
// its value, and its missing parents as the recipes create their
// directories (containers, and the chroot itself, persistent, if it does
// not exist yet), all with the Session's ACL unless WithACL says
// otherwise. It sends nothing. Errors: a
// *zookeeper.PathError (recipe.ErrInvalidPath; with zookeeper.ErrReservedName
// for a segment named like a recipe's queue node, which would take the
// register, a persistent znode, for a contender that never leaves).
func New(s *zookeeper.Session, path string, opts ...Option) (*Register, error) {
	side := zkside.SessionOf(s)
	if err := side.ValidatePath(path); err != nil {
		return nil, err
	}
	r := &Register{s: s, side: side, path: path, full: side.Chroot() + path, acl: side.ACL()}
	for _, o := range opts {
		o(r)
	}
	r.guarded = r.keepsFromOthers()
	return r, nil
}

// Path returns the register's path (below the chroot).
func (r *Register) Path() string { return r.path }

// Read returns the register's content: the zero Value with Version -1 if
// its znode does not exist yet. Errors: ErrNotRegister for data in another
// format, otherwise ZooKeeper's (e.g. zk.ErrConnectionClosed).
func (r *Register) Read(ctx context.Context) (Value, error) {
	if err := ctx.Err(); err != nil {
		return Value{}, err
	}
	data, st, err := r.s.Conn().Get(r.full)
	if errors.Is(err, zk.ErrNoNode) {
		return Value{Version: -1}, nil
	}
	if err != nil {
		return Value{}, fmt.Errorf("fencezk: reading %s: %w", shortpath.Of(r.path), err)
	}
	return decode(r.path, data, st.Version)
}

// Write stores data with token if token is not lower than the register's
// (an equal one is accepted) and returns what it replaced: the new data
// version is prev.Version+1; the first write creates the znode, prev then
// being Read's missing register (Version -1, zero token). Errors, with
// nothing written: a *fence.StaleError (fence.ErrStale) with the stored
// token when token is lower; fence.ErrNoToken; a *fence.RangeError
// (fence.ErrTokenOverflow) above fence.MaxToken; an *ACLError
// (zookeeper.ErrUntrustedDir); ErrNotRegister; recipe.ErrTooLarge over the
// packet limit; ctx's error; ZooKeeper's. Only fence.ErrUncertain (sent,
// answer lost: connection loss, session expiry) means it may have landed.
func (r *Register) Write(ctx context.Context, token fence.Token, data []byte) (prev Value, err error) {
	prev, _, err = r.write(ctx, token, data, nil)
	return prev, fence.Reported(err, nil, r.OnStale)
}

// Apply runs ops in one ZooKeeper multi with the register's versioned
// setData, if token is not lower than the register's: the ops land only with
// the token, none of them otherwise; the register keeps its value and takes
// token. Paths in ops, and the created paths in res, are relative to the
// session's chroot; res[0] is the register's own setData (its create when it
// did not exist). Errors: Write's (recipe.ErrTooLarge for the whole multi);
// ErrBadOp for an op of another type or with a path New refuses
// (zookeeper.ErrReservedName for a name like a queue node's); if ZooKeeper
// refuses one of ops, the multi applies nothing and its error is returned
// with the op's index.
func (r *Register) Apply(ctx context.Context, token fence.Token, ops ...any) (prev Value, res []zk.MultiResponse, err error) {
	if len(ops) == 0 {
		return Value{}, nil, fmt.Errorf("%w: no operation", ErrBadOp)
	}
	rooted := make([]any, len(ops))
	for i, op := range ops {
		if rooted[i], err = r.root(op); err != nil {
			return Value{}, nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	prev, res, err = r.write(ctx, token, nil, rooted)
	return prev, res, fence.Reported(err, nil, r.OnStale)
}

// write is Write (ops nil: set data) and Apply (keep the data, run ops).
func (r *Register) write(ctx context.Context, token fence.Token, data []byte, ops []any) (Value, []zk.MultiResponse, error) {
	if token.IsZero() {
		return Value{}, nil, fence.ErrNoToken
	}
	if err := fence.CheckToken(token); err != nil {
		return Value{}, nil, err
	}
	conn := r.s.Conn()
	for {
		if err := ctx.Err(); err != nil {
			return Value{}, nil, err
		}
		raw, st, err := conn.Get(r.full)
		cur := Value{Version: -1}
		switch {
		case errors.Is(err, zk.ErrNoNode): // the empty register: created below with the write
		case err != nil:
			return Value{}, nil, fmt.Errorf("fencezk: reading %s: %w", shortpath.Of(r.path), err)
		default:
			if cur, err = decode(r.path, raw, st.Version); err != nil {
				return Value{}, nil, err
			}
		}
		if r.guarded && (cur.Version < 0 || st.Czxid != r.trusted.Load()) {
			if err := r.vet(ctx, cur.Version >= 0); errors.Is(err, errVanished) {
				continue
			} else if err != nil {
				return cur, nil, err
			}
		}
		if token < cur.Token {
			return cur, nil, &fence.StaleError{Resource: r.path, Token: token, Highest: cur.Token}
		}
		next := data
		if ops != nil {
			next = cur.Data
		}
		// A versioned setData, or the create of the missing register:
		// either lands only over the state just read.
		var req any = &zk.SetDataRequest{Path: r.full, Data: encode(token, next), Version: cur.Version}
		if cur.Version < 0 {
			req = &zk.CreateRequest{Path: r.full, Data: encode(token, next), Acl: r.acl}
		}
		if err := r.check(req, ops); err != nil {
			return cur, nil, fmt.Errorf("fencezk: writing %s: %w", r.path, err)
		}
		res, failed, err := r.send(req, ops)
		switch {
		case err == nil:
			if r.guarded && cur.Version < 0 {
				r.made()
			}
			return cur, r.unroot(res), nil
		case failed == 0 && (errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists)):
			continue // another write landed since the read: compare again
		case failed == 0 && errors.Is(err, zk.ErrNoNode) && cur.Version < 0:
			// The register's parent is missing (or the chroot): create
			// them as the recipes create their directories (a guarded
			// Register's vet does, and checks what it did not make).
			if r.guarded {
				continue
			}
			if _, err := r.side.EnsureDir(ctx, path.Dir(r.path), r.acl); err != nil {
				return cur, nil, wrapParents(r.path, err)
			}
			continue
		case failed == 0 && errors.Is(err, zk.ErrNoNode):
			continue // the register was deleted since the read
		case failed > 0:
			return cur, r.unroot(res), fmt.Errorf("fencezk: op %d refused, nothing applied: %w", failed-1, err)
		case errors.Is(err, zk.ErrShortBuffer): // over the send buffer: never sent
			return cur, nil, fmt.Errorf("fencezk: writing %s: %w: %w", shortpath.Of(r.path), recipe.ErrTooLarge, err)
		case res == nil && !definite(err):
			return cur, nil, fmt.Errorf("%w: writing %s: %w", fence.ErrUncertain, shortpath.Of(r.path), err)
		}
		return cur, nil, fmt.Errorf("fencezk: writing %s: %w", shortpath.Of(r.path), err)
	}
}

// check reports whether req, the register's setData or create, alone
// (ops nil) or in one multi with ops, fits the packet limit (an error
// matching recipe.ErrTooLarge). It sends nothing.
func (r *Register) check(req any, ops []any) error {
	if ops == nil {
		return r.side.CheckRequest(req)
	}
	return r.side.CheckMulti(append([]any{req}, ops...)...)
}

// send sends req alone (ops nil) or in one multi with ops. failed is the
// index of the op ZooKeeper refused in a failed multi (0: the register's).
func (r *Register) send(req any, ops []any) (res []zk.MultiResponse, failed int, err error) {
	conn := r.s.Conn()
	if ops == nil {
		if set, ok := req.(*zk.SetDataRequest); ok {
			_, err = conn.Set(set.Path, set.Data, set.Version)
		} else {
			_, err = conn.Create(r.full, req.(*zk.CreateRequest).Data, 0, r.acl)
		}
		return nil, 0, err
	}
	res, err = conn.Multi(append([]any{req}, ops...)...)
	return res, refused(res), err
}

// refused returns the index in a failed multi's responses of the op
// ZooKeeper refused: the first with an error (those before it say ok, those
// after it "runtime inconsistency").
func refused(res []zk.MultiResponse) int {
	for i, r := range res {
		if r.Error != nil {
			return i
		}
	}
	return 0
}

// definite reports whether err is ZooKeeper's answer to the request (it
// was refused, nothing applied) rather than a lost answer.
func definite(err error) bool {
	for _, e := range []error{zk.ErrBadVersion, zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNotEmpty, zk.ErrNoAuth,
		zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals, zk.ErrAuthFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sequential reports whether a create with flags appends a sequence to
// its path.
func sequential(flags int32) bool {
	return flags == zk.FlagSequence || flags == zk.FlagEphemeralSequential || flags == zk.FlagPersistentSequentialWithTTL
}

// root returns a copy of op with its path below the chroot.
func (r *Register) root(op any) (any, error) {
	check := func(p string, sequential bool) (string, error) {
		validate := r.side.ValidatePath
		if sequential {
			validate = r.side.ValidateSequentialPath // the server appends a sequence
		}
		if err := validate(p); err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadOp, err)
		}
		if p == r.path {
			return "", fmt.Errorf("%w: %s is the register itself", ErrBadOp, p)
		}
		return r.side.Chroot() + p, nil
	}
	var err error
	switch o := op.(type) {
	case *zk.CreateRequest:
		c := *o
		c.Path, err = check(o.Path, sequential(o.Flags))
		return &c, err
	case *zk.SetDataRequest:
		c := *o
		c.Path, err = check(o.Path, false)
		return &c, err
	case *zk.DeleteRequest:
		c := *o
		c.Path, err = check(o.Path, false)
		return &c, err
	case *zk.CheckVersionRequest:
		c := *o
		c.Path, err = check(o.Path, false)
		return &c, err
	}
	return nil, fmt.Errorf("%w: %T (want *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or *zk.CheckVersionRequest)", ErrBadOp, op)
}

// unroot strips the chroot from the created paths of res.
func (r *Register) unroot(res []zk.MultiResponse) []zk.MultiResponse {
	if c := r.side.Chroot(); c != "" {
		for i := range res {
			res[i].String = strings.TrimPrefix(res[i].String, c)
		}
	}
	return res
}

const header = "token="

func encode(token fence.Token, data []byte) []byte {
	b := make([]byte, 0, len(header)+20+1+len(data))
	b = append(b, header...)
	b = append(b, token.String()...)
	b = append(b, '\n')
	return append(b, data...)
}

func decode(path string, raw []byte, version int32) (Value, error) {
	if len(raw) == 0 {
		return Value{Version: version}, nil
	}
	line, data, ok := bytes.Cut(raw, []byte{'\n'})
	if !ok || !bytes.HasPrefix(line, []byte(header)) {
		return Value{}, fmt.Errorf("%w: %s holds %.40q", ErrNotRegister, shortpath.Of(path), raw)
	}
	t, err := fence.ParseToken(string(line[len(header):]))
	if err != nil {
		return Value{}, fmt.Errorf("%w: %s: %w", ErrNotRegister, shortpath.Of(path), err)
	}
	return Value{Token: t, Data: data, Version: version}, nil
}
