package zktest

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// TestExpireSession expires a client's session on demand: its ephemeral
// znode goes at once, the client is told its session expired (and gets a
// new one), and expiring the old session again reports ErrSessionGone.
func TestExpireSession(t *testing.T) {
	c := Shared(t)
	tap := NewSessionTap()
	p := serverkit.NewFaultProxy()
	defer p.Close()
	conn, events := connect(t, c.Addrs(), 10*time.Second, tap.Dialer(p.Dial))
	id, pw, ok := tap.Session()
	if !ok || id != conn.SessionID() || len(pw) == 0 {
		t.Fatalf("tap saw session 0x%x (ok %v, %d-byte password); client has 0x%x", id, ok, len(pw), conn.SessionID())
	}
	eph := c.Chroot() + "/eph"
	if _, err := conn.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	zxid, err := ExpireSession(ctxT(t), c.Addrs(), id, pw)
	if err != nil {
		t.Fatalf("ExpireSession: %v", err)
	}
	in := Inspect(t, c)
	if in.Stat("/eph") != nil {
		t.Fatal("the ephemeral znode survived the expiry")
	}
	if st := in.Stat(""); st == nil || zxid <= 0 || zxid != st.Pzxid {
		t.Fatalf("closeSession zxid %d, want the chroot's pzxid (the ephemeral's deletion): %+v", zxid, st)
	}
	waitState(t, events, zk.StateExpired, 10*time.Second)
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	t.Logf("client told of the expiry and reconnected within %v", time.Since(start).Round(time.Millisecond))
	if id2, _, ok := tap.Session(); !ok || id2 == id {
		t.Fatalf("tap did not record the new session (0x%x, ok %v)", id2, ok)
	}
	if _, err := ExpireSession(ctxT(t), c.Addrs(), id, pw); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("expiring an expired session: %v, want ErrSessionGone", err)
	}
}

// TestBlackholeFor forwards nothing for the given time, then resumes.
func TestBlackholeFor(t *testing.T) {
	c := Shared(t)
	p := serverkit.NewFaultProxy()
	defer p.Close()
	conn, events := connect(t, c.Addrs(), 2*time.Second, p.Dial)
	start := time.Now()
	p.BlackholeFor(ctxT(t), 300*time.Millisecond)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("BlackholeFor returned after %v", d)
	}
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	if _, _, err := conn.Exists(c.Chroot()); err != nil {
		t.Fatal(err)
	}
}

// TestExpireSessionBadInput: input that cannot name a session is refused
// before any server is contacted, and a wrong password is refused by the
// server without closing the session.
func TestExpireSessionBadInput(t *testing.T) {
	c := Shared(t)
	for _, tc := range []struct {
		name   string
		addrs  []string
		id     int64
		passwd []byte
	}{
		{"no addresses", nil, 0x1234, []byte("pw")},
		{"session 0", c.Addrs(), 0, []byte("pw")},
		{"no password", c.Addrs(), 0x1234, nil},
	} {
		if _, err := ExpireSession(ctxT(t), tc.addrs, tc.id, tc.passwd); !errors.Is(err, ErrBadSession) {
			t.Errorf("%s: %v, want ErrBadSession", tc.name, err)
		}
	}
	tap := NewSessionTap()
	conn, _ := connect(t, c.Addrs(), 10*time.Second, tap.Dialer(nil))
	id, pw, ok := tap.Session()
	if !ok {
		t.Fatal("tap saw no session")
	}
	eph := c.Chroot() + "/eph-wrong-password"
	if _, err := conn.Create(eph, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	wrong := append([]byte(nil), pw...)
	wrong[0] ^= 0xff
	if _, err := ExpireSession(ctxT(t), c.Addrs(), id, wrong); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("wrong password: %v, want ErrSessionGone", err)
	}
	if Inspect(t, c).Stat("/eph-wrong-password") == nil {
		t.Fatal("a refused expiry deleted the session's ephemeral znode")
	}
}
