package etcdlock

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/grant"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/member"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// MaxMemberData is the largest data a member carries, in bytes (Join and
// Update refuse more with an error matching recipe.ErrTooLarge). etcd
// refuses a request over 1.5 MiB by default (--max-request-bytes); 1 MiB
// leaves room for the key and the transaction around the data, and keeps a
// View of a few members far from gRPC's message limits.
const MaxMemberData = 1 << 20

// Group is group membership on etcd (recipe.Group): each member is one key,
// <prefix>/<name>/_member_<id>, under its Session's etcd lease. How long a
// dead or cut-off member stays visible, and how Update settles a lost
// answer: "Group membership" in the package documentation. A Group holds no
// state beyond its name and Session; it is safe for concurrent use.
type Group struct {
	s    *Session
	name string
	dir  string          // the range prefix of the member keys
	rep  *grant.Reporter // where registrations report their loss
}

var _ recipe.Group = (*Group)(nil)

// kindMember is the Metrics kind of a Group's lost registrations.
const kindMember = "member"

// NewGroup returns the group named name on s. A name is checked as a lock
// name (CheckName): an invalid one returns a *NameError matching
// ErrInvalidName and recipe.ErrInvalidPath; a nil s, an error matching
// recipe.ErrBadOption. Nothing is sent to the server.
func NewGroup(s *Session, name string) (*Group, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Session", recipe.ErrBadOption)
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	rep := &grant.Reporter{Log: s.log, Backend: "etcdlock", Kind: kindMember, Dir: name}
	return &Group{s: s, name: name, dir: groupDir(s.prefix, name), rep: rep}, nil
}

// Name returns the group's name as given to NewGroup.
func (gr *Group) Name() string { return gr.name }

// Join registers the caller as member id carrying data, putting its key in
// a transaction that fails when the key exists, and returns once it exists;
// the member keeps it until Leave or the Session's Close. Errors:
// recipe.ErrMemberExists while another registration (of any Session) holds
// id; recipe.CheckMemberID's; recipe.ErrTooLarge over MaxMemberData; ctx's
// cause; recipe.ErrSessionClosed; recipe.ErrSessionLost; a *recipe.OpError.
// An error leaves no key behind (a put whose answer never came is deleted
// when it comes, or goes with the etcd lease).
func (gr *Group) Join(ctx context.Context, id string, data []byte) (recipe.Member, error) {
	if err := recipe.CheckMemberID(id); err != nil {
		return nil, err
	}
	if err := checkData(data); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	r := newRegistrar(gr, id)
	if !gr.s.claim(r.key) {
		return nil, fmt.Errorf("%w: %q (by another Member of this Session)", recipe.ErrMemberExists, id)
	}
	m, err := member.Join(ctx, id, bytes.Clone(data), r, gr.s.log.With("group", gr.name))
	if err != nil {
		r.finish()
		return nil, err
	}
	return m, nil
}

// checkData refuses data over MaxMemberData.
func checkData(data []byte) error {
	if len(data) > MaxMemberData {
		return fmt.Errorf("%w: etcdlock: member data of %d bytes, over MaxMemberData (%d)", recipe.ErrTooLarge, len(data), MaxMemberData)
	}
	return nil
}

// Members returns the group as etcd held it at one revision (View.Rev, the
// revision of the read): one range read of the group's keys, linearizable,
// retried on transient errors until ctx ends. Members are sorted by ID;
// Since is each key's create revision; keys of the range that are not
// members are left out. Errors: ctx's cause, recipe.ErrSessionClosed, a
// *recipe.OpError from etcd.
func (gr *Group) Members(ctx context.Context) (recipe.View, error) {
	st, err := gr.list(ctx)
	if err != nil {
		return recipe.View{}, err
	}
	return st.view(), nil
}

// groupState is the group's range as a reader knows it at revision rev.
type groupState struct {
	gr      *Group
	rev     int64
	keys    map[string]struct{}          // every key of the range, member or not
	members map[string]recipe.MemberInfo // by id
}

// list reads the group's range at one revision.
func (gr *Group) list(ctx context.Context) (*groupState, error) {
	s := gr.s
	ctx, cancel := s.life.Bind(ctx)
	defer cancel()
	var resp *clientv3.GetResponse
	b := loop.BackOff(retryFirst, retryMax)
	for {
		unanswered, err := try(ctx, attemptTimeout(s.cfg.ttl), func(ctx context.Context) (err error) {
			resp, err = s.cli.Get(ctx, gr.dir, clientv3.WithPrefix())
			return err
		})
		switch {
		case err == nil:
			st := &groupState{gr: gr, rev: resp.Header.Revision, keys: map[string]struct{}{}, members: map[string]recipe.MemberInfo{}}
			for _, kv := range resp.Kvs {
				st.put(kv.Key, kv.Value, kv.CreateRevision)
			}
			return st, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case unanswered:
			continue
		case !transient(err):
			return nil, opError("get", gr.dir, err)
		}
		if loop.Pause(ctx, b, retryMax) != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// put records a key of the range as it is now.
func (st *groupState) put(key, value []byte, since int64) {
	st.keys[string(key)] = struct{}{}
	if mi, ok := st.gr.parse(key, value, since); ok {
		st.members[mi.ID] = mi
	}
}

// remove records the deletion of a key of the range.
func (st *groupState) remove(key []byte) {
	delete(st.keys, string(key))
	if mi, ok := st.gr.parse(key, nil, 0); ok {
		delete(st.members, mi.ID)
	}
}

// view returns the state as a View, its members sorted by ID.
func (st *groupState) view() recipe.View {
	v := recipe.View{Rev: st.rev}
	for _, mi := range st.members {
		mi.Data = bytes.Clone(mi.Data) // a reader may keep or change it
		v.Members = append(v.Members, mi)
	}
	sortMembers(v.Members)
	return v
}

// parse returns the member a key of the group's range is, if it is one:
// the rest of the key after the range prefix is a valid member id.
func (gr *Group) parse(key, value []byte, since int64) (recipe.MemberInfo, bool) {
	id, ok := strings.CutPrefix(string(key), gr.dir)
	if !ok || recipe.CheckMemberID(id) != nil {
		return recipe.MemberInfo{}, false
	}
	return recipe.MemberInfo{ID: id, Data: value, Since: since}, true
}

// sortMembers sorts ms by ID.
func sortMembers(ms []recipe.MemberInfo) {
	slices.SortFunc(ms, func(a, b recipe.MemberInfo) int { return strings.Compare(a.ID, b.ID) })
}

// claim records that a Member of s holds key, and reports false if one
// does already.
func (s *Session) claim(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.members[key]; held {
		return false
	}
	if s.members == nil {
		s.members = map[string]struct{}{}
	}
	s.members[key] = struct{}{}
	return true
}

// unclaim forgets the claim of key.
func (s *Session) unclaim(key string) {
	s.mu.Lock()
	delete(s.members, key)
	s.mu.Unlock()
}
