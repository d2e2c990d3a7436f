package k8slease

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// testMutex is a Mutex on a Session that sends nothing: for the pure
// functions of Holder and ObserveHolder.
func testMutex() *Mutex {
	s := &Session{cfg: config{duration: 2 * time.Second}, seen: map[string]*observation{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &Mutex{s: s, namespace: "ns", name: "n", path: "ns/n"}
}

// version returns l as the server stores it at resourceVersion rv.
func version(l *coordv1.Lease, rv string) *coordv1.Lease {
	l = l.DeepCopy()
	l.ResourceVersion = rv
	return l
}

// TestStateAt: the token of a grant comes from its holder's annotation, or
// from the grant's own write; a client-go renewal has none; an annotation
// of another identity is ignored; one naming the holder with something
// other than a token of its grant is ErrBadRecord.
func TestStateAt(t *testing.T) {
	m := testMutex()
	t0 := time.Now()
	take := version(newRecord("ns", "n", "me#1", 2*time.Second, t0), "10")
	renewal := version(stamped(renewed(take, t0.Add(time.Second), 2*time.Second), 10), "12")
	unstamped := version(renewed(take, t0.Add(time.Second), 2*time.Second), "13")
	stale := version(stamped(renewed(taken(take, "you", 2*time.Second, t0), t0.Add(time.Second), 2*time.Second), 10), "14")
	stale.Annotations[TokenAnnotation] = "10 me#1"
	for _, c := range []struct {
		what  string
		l     *coordv1.Lease
		token uint64
		known bool
	}{
		{"the grant's write", take, 10, true},
		{"a stamped renewal", renewal, 10, true},
		{"a renewal without the annotation", unstamped, 0, false},
		{"an annotation of an earlier holder", stale, 0, false},
	} {
		st, _, known, err := m.stateAt(c.l, t0)
		if err != nil || !st.Held || uint64(st.Holder.Token) != c.token || known != c.known || !st.Holder.Since.Equal(t0) {
			t.Errorf("%s: %v (since %v), known %v, %v", c.what, st, st.Holder.Since, known, err)
		}
	}
	for _, v := range []string{"abc me#1", "0 me#1", "13 me#1", "-1 me#1", " me#1"} {
		bad := version(renewal, "12")
		bad.Annotations[TokenAnnotation] = v
		if _, _, _, err := m.stateAt(bad, t0); !errors.Is(err, ErrBadRecord) {
			t.Errorf("annotation %q: %v, want ErrBadRecord", v, err)
		}
	}
	for what, l := range map[string]*coordv1.Lease{"released": released(renewal, t0), "taken": taken(renewal, "you", time.Second, t0)} {
		if v, ok := l.Annotations[TokenAnnotation]; ok {
			t.Errorf("%s: the annotation %q kept", what, v)
		}
	}
	m = testMutex()
	if st, _, _, err := m.stateAt(take, t0); err != nil || !st.Held {
		t.Errorf("first seen: %v, %v, want held", st, err)
	}
	if st, _, _, err := m.stateAt(take, t0.Add(2*time.Second)); err != nil || st.Held {
		t.Errorf("seen unchanged for the duration: %v, %v, want free", st, err)
	}
	if st, _, _, err := m.stateAt(version(released(renewal, t0), "20"), t0); err != nil || st.Held {
		t.Errorf("released: %v, %v", st, err)
	}
}

// TestObserverRecord: the observer keeps a grant's token across renewals
// that do not record it, skips a token that is not past a version naming
// someone else (it can only be forged), and ignores versions older than
// one applied.
func TestObserverRecord(t *testing.T) {
	m := testMutex()
	o := &observer{m: m, out: notify.NewLatest(recipe.HolderState.Equal)}
	t0 := time.Now()
	want := func(what string, held bool, id string, token uint64) {
		t.Helper()
		st := o.out.Last()
		if st.Held != held || st.Holder.ID != id || uint64(st.Holder.Token) != token {
			t.Errorf("%s: %v, want held %v by %q with %d", what, st, held, id, token)
		}
	}
	a := version(newRecord("ns", "n", "a", 2*time.Second, t0), "10")
	o.apply(a, false)
	want("a's grant", true, "a", 10)
	o.apply(version(renewed(a, t0.Add(time.Second), 2*time.Second), "11"), false)
	want("a renewed without its token", true, "a", 10)
	b := version(taken(a, "b", 2*time.Second, t0), "20")
	o.apply(b, false)
	want("b's grant", true, "b", 20)
	o.apply(version(a, "15"), false)
	want("an older version", true, "b", 20)
	forged := version(stamped(renewed(taken(b, "c", 2*time.Second, t0), t0.Add(time.Second), 2*time.Second), 19), "30")
	o.apply(forged, false)
	want("a token below the version naming b", true, "b", 20)
	o.apply(version(b, "31"), true)
	want("deleted", false, "", 0)
	select {
	case st := <-o.out.C():
		if st != (recipe.HolderState{}) {
			t.Errorf("free not queued: %v", st)
		}
	default:
		t.Errorf("free not queued: nothing for the reader")
	}
}
