package k8snem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/testkit/nemesis"
)

// Fault kinds of the Kubernetes target, beside the engine's generic client
// faults (cut, blackhole, latency, pause of a client).
const (
	FaultKillAPIServer  = "kill-apiserver"  // SIGKILL the API server, restart it (same port, same etcd) after d
	FaultPauseAPIServer = "pause-apiserver" // SIGSTOP the API server past the lease duration, then SIGCONT
	FaultKillEtcd       = "kill-etcd"       // SIGKILL etcd under the API server, restart it (same data) after d
	FaultDeleteLease    = "delete-lease"    // an operator's delete of the held Lease: a revocation (for a contender that had not seen it held)
	FaultTakeLease      = "take-lease"      // an operator's update that takes the held Lease (as another elector would): a revocation
)

// operator is the holderIdentity take-lease writes, with a duration of
// operatorSeconds: the contenders take the Lease back that long after they
// see it.
const (
	operator        = "nemesis-operator"
	operatorSeconds = 1
)

// Faults lists the target's fault kinds: the server faults one at a time
// (none while a failed restart or resume left a server down), and the
// operator's writes, which wait while the API server can't answer.
func (t *Target) Faults() []nemesis.FaultKind {
	down := func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.apiDown || t.etcdDown || t.paused
	}
	return []nemesis.FaultKind{
		{Name: FaultKillAPIServer, Scope: nemesis.ScopeServer, Inject: t.killAPIServer, Busy: down},
		{Name: FaultPauseAPIServer, Scope: nemesis.ScopeServer, Inject: t.pauseAPIServer, Busy: down},
		{Name: FaultKillEtcd, Scope: nemesis.ScopeServer, Inject: t.killEtcd, Busy: down},
		{Name: FaultDeleteLease, Scope: nemesis.ScopeStore, Inject: t.deleteLease, Busy: down},
		{Name: FaultTakeLease, Scope: nemesis.ScopeStore, Inject: t.takeLease, Busy: down},
	}
}

// restartTimeout bounds a restart of a killed process; it runs to its end
// even when the fault's ctx ended (a server left down would starve the
// run: Heal would have to do it).
const restartTimeout = 60 * time.Second

// killAPIServer kills the API server (SIGKILL) and restarts it after d:
// requests in flight fail, watches end, and the clients' connections are
// refused meanwhile.
func (t *Target) killAPIServer(ctx context.Context, f *nemesis.Fault, d time.Duration, _ *rand.Rand) {
	f.Target = "API server " + t.c.Host()
	t.set(&t.apiDown, true)
	if err := t.c.KillAPIServer(); err != nil {
		f.Err = err.Error()
	}
	_ = loop.Sleep(ctx, d)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
	defer cancel()
	if err := t.c.RestartAPIServer(rctx); err != nil {
		f.Err = "restart: " + err.Error() // apiDown stays: Heal tries again
		return
	}
	t.set(&t.apiDown, false)
}

// pauseAPIServer stops the API server (SIGSTOP) for d, and at least 1.5
// lease durations, so that every holder's deadline passes while its
// renewals wait in the kernel's queues; then SIGCONT.
func (t *Target) pauseAPIServer(ctx context.Context, f *nemesis.Fault, d time.Duration, _ *rand.Rand) {
	f.Target = "API server " + t.c.Host()
	t.set(&t.paused, true)
	if err := t.c.PauseAPIServer(); err != nil {
		f.Err = err.Error()
	}
	_ = loop.Sleep(ctx, max(d, t.d*3/2))
	if err := t.c.ResumeAPIServer(); err != nil {
		f.Err = "resume: " + err.Error() // paused stays: Heal tries again
		return
	}
	t.set(&t.paused, false)
}

// killEtcd kills etcd (SIGKILL) under the running API server and restarts
// it on its data after d: the API server answers errors meanwhile.
func (t *Target) killEtcd(ctx context.Context, f *nemesis.Fault, d time.Duration, _ *rand.Rand) {
	f.Target = "etcd"
	t.set(&t.etcdDown, true)
	if err := t.c.KillEtcd(); err != nil {
		f.Err = err.Error()
	}
	_ = loop.Sleep(ctx, d)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
	defer cancel()
	if err := t.c.RestartEtcd(rctx); err != nil {
		f.Err = "restart: " + err.Error()
		return
	}
	t.set(&t.etcdDown, false)
}

// pickLease draws one of the run's Leases with rng ("" when no lock was
// asked for yet: f says so).
func (t *Target) pickLease(f *nemesis.Fault, rng *rand.Rand) string {
	t.mu.Lock()
	names := make([]string, 0, len(t.leases))
	for n := range t.leases {
		names = append(names, n)
	}
	t.mu.Unlock()
	if len(names) == 0 {
		f.Target, f.Err = "no lock", "no lock asked for yet"
		return ""
	}
	slices.Sort(names)
	return names[rng.IntN(len(names))]
}

// heldLease reads the Lease name; nil when it does not exist or names no
// holder other than the operator (f says so), or the read failed (f.Err).
func (t *Target) heldLease(ctx context.Context, f *nemesis.Fault, name string) *coordv1.Lease {
	f.Target = "Lease " + t.ns + "/" + name
	cur, err := t.admin.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		f.Target += " (none)"
		return nil
	case err != nil:
		f.Err = "reading it: " + err.Error()
		return nil
	case cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity == "" || *cur.Spec.HolderIdentity == operator:
		f.Target += " (not held)"
		return nil
	}
	return cur
}

// revoked records the outcome of an operator's write based on version rv
// of a held Lease: applied (err nil), the grant holding at rv and every
// earlier one is gone, so every grant with a token up to rv (a grant's
// token is the resourceVersion of the write that took the Lease) was
// removed; refused (a conflict or a missing Lease: the precondition
// failed), nothing was; any other error may or may not have applied it.
func revoked(f *nemesis.Fault, rv string, err error) {
	switch {
	case err == nil:
		n, perr := strconv.ParseUint(rv, 10, 64)
		f.Revokes, f.Certain = true, true
		if perr != nil {
			f.Err = fmt.Sprintf("resourceVersion %q: %v", rv, perr) // certain, but Below unknown
			return
		}
		f.Below = fence.Token(n + 1)
		f.Target += " at resourceVersion " + rv
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		f.Err = err.Error() // the Lease changed since the read: not applied
	default:
		f.Revokes, f.Err = true, err.Error()
	}
}

// operatorAttempts bounds an operator's read-and-write of a held Lease that
// the Lease's changes keep refusing (409 Conflict: a renewal, release or
// grant came between the read and the write): it reads again and retries,
// as kubectl's edits do.
const operatorAttempts = 5

// operatorWrite reads a held Lease and applies write to it based on the
// version read, again while the Lease changed in between; it records the
// outcome in f (revoked).
func (t *Target) operatorWrite(ctx context.Context, f *nemesis.Fault, rng *rand.Rand, write func(context.Context, *coordv1.Lease) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	name := t.pickLease(f, rng)
	if name == "" {
		return
	}
	for range operatorAttempts {
		f.Err = ""
		cur := t.heldLease(ctx, f, name)
		if cur == nil {
			return
		}
		err := write(ctx, cur)
		revoked(f, cur.ResourceVersion, err)
		if !apierrors.IsConflict(err) {
			return
		}
	}
}

// deleteLease deletes a held Lease as an operator would (kubectl delete
// lease), with the version read as precondition: its holder learns of it
// at its next renewal or from its watch. A contender that last saw the
// Lease held counts the deletion as held for D after it saw it, and is
// granted after the holder stopped; one that had not (its first read
// finds no Lease, or it last saw it free) creates the Lease anew at once,
// possibly before the holder learned: so the delete is a revocation
// (docs/backends.md, "Revocation by a third party").
func (t *Target) deleteLease(ctx context.Context, f *nemesis.Fault, _ time.Duration, rng *rand.Rand) {
	t.operatorWrite(ctx, f, rng, func(ctx context.Context, cur *coordv1.Lease) error {
		rv := cur.ResourceVersion
		return t.admin.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	})
}

// takeLease writes the operator as the holder of a held Lease, for
// operatorSeconds, with one more transition (what a client-go elector's
// takeover writes), based on the version read: the holder learns of it at
// its next renewal or from its watch; the contenders take the Lease back
// operatorSeconds after they see the operator's version.
func (t *Target) takeLease(ctx context.Context, f *nemesis.Fault, _ time.Duration, rng *rand.Rand) {
	t.operatorWrite(ctx, f, rng, func(ctx context.Context, cur *coordv1.Lease) error {
		l := cur.DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		id, secs, n := operator, int32(operatorSeconds), int32(0)
		if tr := cur.Spec.LeaseTransitions; tr != nil && *tr >= 0 && *tr < 1<<31-1 {
			n = *tr + 1
		}
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.LeaseTransitions = &id, &secs, &n
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		_, err := t.admin.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}
