package k8slease

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zkrecipes/zkrecipes/fence"
)

// The Lease fields are those of client-go's leader election (its LeaseLock):
// holderIdentity, leaseDurationSeconds, acquireTime, renewTime and
// leaseTransitions, so that either side sees the other's holder. The times
// are written for people and for client-go; this package never compares
// them with its own clock.

// holderOf returns the Lease's holder identity ("" for none: free).
func holderOf(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// durationOf returns the Lease's leaseDurationSeconds, or fallback when it
// has none that is positive.
func durationOf(l *coordv1.Lease, fallback time.Duration) time.Duration {
	if l == nil || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds <= 0 {
		return fallback
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

// newRecord is the Lease that a grant creates when none exists.
func newRecord(namespace, name, id string, d time.Duration, now time.Time) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	setHolder(l, id, d, now)
	l.Spec.LeaseTransitions = ptr(int32(0))
	return l
}

// taken returns cur as a grant to id writes it: the holder, its duration,
// both times now, one more transition, and no TokenAnnotation (the
// previous holder's). cur's resourceVersion stays in the copy: the update
// is refused (409 Conflict) if the Lease changed since.
func taken(cur *coordv1.Lease, id string, d time.Duration, now time.Time) *coordv1.Lease {
	l := cur.DeepCopy()
	delete(l.Annotations, TokenAnnotation)
	setHolder(l, id, d, now)
	var n int32
	if t := cur.Spec.LeaseTransitions; t != nil && *t >= 0 && *t < 1<<31-1 {
		n = *t + 1
	}
	l.Spec.LeaseTransitions = &n
	return l
}

// setHolder writes id as l's holder for d, acquired and renewed at now.
func setHolder(l *coordv1.Lease, id string, d time.Duration, now time.Time) {
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = ptr(id)
	l.Spec.LeaseDurationSeconds = ptr(int32(d / time.Second))
	l.Spec.AcquireTime = &t
	l.Spec.RenewTime = ptr(t)
}

// renewed returns cur with renewTime now and the holder's own duration d
// (version kept: see taken). Writing d back undoes an edit of the
// duration by someone else, which a contender of client-go's would trust.
func renewed(cur *coordv1.Lease, now time.Time, d time.Duration) *coordv1.Lease {
	l := cur.DeepCopy()
	l.Spec.RenewTime = ptr(metav1.NewMicroTime(now))
	l.Spec.LeaseDurationSeconds = ptr(int32(d / time.Second))
	return l
}

// released returns cur given up as client-go's ReleaseOnCancel gives a
// Lease up: no holder, a duration of 1 s, both times now; transitions kept,
// the TokenAnnotation removed.
func released(cur *coordv1.Lease, now time.Time) *coordv1.Lease {
	l := cur.DeepCopy()
	delete(l.Annotations, TokenAnnotation)
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = ptr("")
	l.Spec.LeaseDurationSeconds = ptr(int32(1))
	l.Spec.AcquireTime = &t
	l.Spec.RenewTime = ptr(t)
	return l
}

// tokenOf is the fencing token of a grant: the resourceVersion of the write
// that made it, which the API server takes from etcd's revision of that
// write (a counter of the whole etcd keyspace that every write advances).
func tokenOf(rv string) (fence.Token, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: %q", ErrBadResourceVersion, rv)
	}
	return fence.Token(n), nil
}

// TokenAnnotation is the annotation in which the holder of a Lease records
// the fencing token of its grant, with its holderIdentity: "<token> <id>".
// The holder writes it with each renewal (the grant's own write cannot
// hold its resourceVersion); a take and a release remove it. One naming
// another identity than the Lease's holderIdentity is a previous holder's,
// left by a client-go elector's take: it is ignored.
const TokenAnnotation = "k8slease.zkrecipes.io/token"

// stamped records token as the grant's of l's holder in l (a copy about to
// be written), and returns l.
func stamped(l *coordv1.Lease, token fence.Token) *coordv1.Lease {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[TokenAnnotation] = strconv.FormatUint(uint64(token), 10) + " " + holderOf(l)
	return l
}

// stampOf returns the token that l's TokenAnnotation records for its
// holder: found is false when there is none for it (no annotation, or one
// naming another identity); a token that is not a decimal number from 1 to
// l's own resourceVersion rv is ErrBadRecord.
func stampOf(l *coordv1.Lease, rv fence.Token) (_ fence.Token, found bool, _ error) {
	v, ok := l.Annotations[TokenAnnotation]
	if !ok {
		return 0, false, nil
	}
	digits, who, _ := strings.Cut(v, " ")
	if who != holderOf(l) {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 || fence.Token(n) > rv {
		return 0, true, fmt.Errorf("%w: %s %q for holder %q at resourceVersion %d, not a token of its grant",
			ErrBadRecord, TokenAnnotation, clip(digits), clip(who), rv)
	}
	return fence.Token(n), true, nil
}

// clip shortens s, read from the server, for an error or a log line.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

func ptr[T any](v T) *T { return &v }

// versionOf returns l's resourceVersion ("" for no Lease: a watch from
// "" starts at the newest version and shows what exists then).
func versionOf(l *coordv1.Lease) string {
	if l == nil {
		return ""
	}
	return l.ResourceVersion
}
