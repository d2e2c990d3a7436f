package k8slease

import (
	"errors"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
)

// TestRecord checks the Lease fields a grant, a renewal and a release
// write: those of client-go's leader election.
func TestRecord(t *testing.T) {
	now := time.Now()
	l := newRecord("ns", "n", "me#1", 3*time.Second, now)
	l.ResourceVersion = "41"
	if holderOf(l) != "me#1" || durationOf(l, 0) != 3*time.Second || *l.Spec.LeaseTransitions != 0 ||
		!l.Spec.AcquireTime.Time.Equal(now) || !l.Spec.RenewTime.Time.Equal(now) {
		t.Fatalf("newRecord: %+v", l.Spec)
	}
	later := now.Add(time.Second)
	r := renewed(l, later, 3*time.Second)
	if !r.Spec.RenewTime.Time.Equal(later) || !r.Spec.AcquireTime.Time.Equal(now) || r.ResourceVersion != "41" || holderOf(r) != "me#1" {
		t.Errorf("renewed: %+v", r.Spec)
	}
	if !l.Spec.RenewTime.Time.Equal(now) {
		t.Error("renewed changed its argument")
	}
	f := released(r, later)
	if holderOf(f) != "" || *f.Spec.LeaseDurationSeconds != 1 || *f.Spec.LeaseTransitions != 0 || f.ResourceVersion != "41" {
		t.Errorf("released: %+v", f.Spec)
	}
	g := taken(f, "you#2", 5*time.Second, later)
	if holderOf(g) != "you#2" || durationOf(g, 0) != 5*time.Second || *g.Spec.LeaseTransitions != 1 || g.ResourceVersion != "41" {
		t.Errorf("taken: %+v", g.Spec)
	}
	if holderOf(nil) != "" || holderOf(&coordv1.Lease{}) != "" || durationOf(&coordv1.Lease{}, time.Minute) != time.Minute {
		t.Error("empty Lease")
	}
}

// TestToken checks the token's parsing of a resourceVersion.
func TestToken(t *testing.T) {
	if tok, err := tokenOf("18446744073709551615"); err != nil || uint64(tok) != 1<<64-1 {
		t.Errorf("max: %v, %v", tok, err)
	}
	for _, rv := range []string{"", "0", "-1", "abc", "1.5", "18446744073709551616"} {
		if _, err := tokenOf(rv); !errors.Is(err, ErrBadResourceVersion) {
			t.Errorf("tokenOf(%q) = %v", rv, err)
		}
	}
}

// TestObserve checks the contender's clock: only a new version restarts
// the count, and the count is the duration written in the Lease, never
// less than the Session's own; a Lease last seen held and then deleted
// counts as held for that long after the deletion was seen.
func TestObserve(t *testing.T) {
	s := &Session{cfg: config{duration: 2 * time.Second}, seen: map[string]*observation{}}
	t0 := time.Now()
	l := newRecord("ns", "n", "x", 3*time.Second, t0.Add(-time.Hour)) // a wall time far in the past changes nothing
	l.ResourceVersion = "5"
	if got := s.observe("ns/n", l, t0); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("first sighting: %v", got.Sub(t0))
	}
	if got := s.observe("ns/n", l, t0.Add(2*time.Second)); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("same version seen again restarted the count: %v", got.Sub(t0))
	}
	l2 := renewed(l, t0, 3*time.Second)
	l2.ResourceVersion = "6"
	if got := s.observe("ns/n", l2, t0.Add(2*time.Second)); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("new version: %v", got.Sub(t0))
	}
	l3 := renewed(l, t0, time.Second) // shortened by someone with update rights
	l3.ResourceVersion = "7"
	if got := s.observe("ns/n", l3, t0); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("a Lease shortened below our own duration: %v, want our 2s", got.Sub(t0))
	}
	// Deleted after it was seen held: held for its duration after the
	// deletion was first seen, then free.
	if got := s.observe("ns/n", nil, t0.Add(time.Second)); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("a held Lease deleted: %v, want 3s", got.Sub(t0))
	}
	if got := s.observe("ns/n", nil, t0.Add(4*time.Second)); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("the deletion seen again restarted the count: %v", got.Sub(t0))
	}
	// Released (no holder): free at once, and so is its deletion.
	free := released(l3, t0)
	free.ResourceVersion = "9"
	if got := s.observe("ns/n", free, t0); !got.Equal(t0) {
		t.Errorf("released Lease: %v", got.Sub(t0))
	}
	if got := s.observe("ns/n", nil, t0); !got.Equal(t0) {
		t.Errorf("a released Lease deleted: %v", got.Sub(t0))
	}
	if got := s.observe("ns/other", nil, t0); !got.Equal(t0) {
		t.Errorf("a Lease never seen, absent: %v", got.Sub(t0))
	}
}
