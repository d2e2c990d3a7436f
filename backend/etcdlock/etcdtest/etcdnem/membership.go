package etcdnem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

var _ nemesis.GroupClient = (*client)(nil)

// Group returns the etcdlock group on name, which must be under the run's
// base (as Lock's name): its member keys are base/<rest>/_member_<id>.
func (c *client) Group(name string) (recipe.Group, error) {
	rel, ok := strings.CutPrefix(name, c.base+"/")
	if !ok {
		return nil, fmt.Errorf("etcdnem: group %q is not under the run's base %q", name, c.base)
	}
	return etcdlock.NewGroup(c.s, rel)
}

// Members returns t for nemesis.RunMembership: the same Target, except
// that revoke-lease revokes the etcd lease of a member (a key of the
// group base+"/lock", drawn at random) instead of a lock holder's.
func (t *Target) Members() nemesis.Target { return membersTarget{t} }

// membersTarget is Target with revoke-lease aimed at the group's members.
type membersTarget struct{ *Target }

// Faults are Target's, with revoke-lease revoking a member's lease.
func (t membersTarget) Faults() []nemesis.FaultKind {
	kinds := t.Target.Faults()
	for i := range kinds {
		if kinds[i].Name == FaultRevoke {
			kinds[i].Inject = t.revokeMember
		}
	}
	return kinds
}

// revokeMember revokes the etcd lease of a member drawn by rng among the
// group's keys, from the administrator client: etcd deletes the member's
// key (and every other key of its Session) at once, and the member learns
// of it from its watch or its next keep-alive, then registers again under
// its Session's next lease. Client is the member's client ("c<i>"); Below
// is one past its key's create revision (its Since): every registration
// of that client with a smaller Since is gone.
func (t membersTarget) revokeMember(ctx context.Context, f *nemesis.Fault, _ time.Duration, rng *rand.Rand) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	admin, err := t.adminClient()
	if err != nil {
		f.Err = err.Error()
		return
	}
	defer admin.Close()
	t.mu.Lock()
	prefix := t.base + "/lock/_member_"
	t.mu.Unlock()
	resp, err := admin.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) == 0 {
		f.Target, f.Err = "no member", fmt.Sprintf("no member key to revoke (%v)", err)
		return
	}
	kv := resp.Kvs[rng.IntN(len(resp.Kvs))]
	id := strings.TrimPrefix(string(kv.Key), prefix)
	f.Target = fmt.Sprintf("lease %x (member %s)", kv.Lease, id)
	if i, err := strconv.Atoi(strings.TrimPrefix(id, "c")); err == nil {
		f.Client = i
	}
	_, err = admin.Revoke(ctx, clientv3.LeaseID(kv.Lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		f.Err = err.Error() // gone already: nothing taken
		return
	case err != nil:
		f.Revokes, f.Err = true, err.Error() // may or may not have been applied
		return
	}
	f.Revokes, f.Certain, f.Below = true, true, fence.Token(kv.CreateRevision+1)
}
