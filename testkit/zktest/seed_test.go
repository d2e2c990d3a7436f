package zktest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

var openACL = zk.WorldACL(zk.PermAll)

// seqSuffix returns the number after prefix in the sequential node name.
func seqSuffix(t *testing.T, name, prefix string) int32 {
	t.Helper()
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		t.Fatalf("sequential node %q does not start with %q", name, prefix)
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		t.Fatalf("sequential node %q: suffix: %v", name, err)
	}
	return int32(n)
}

// createSeq makes a persistent sequential create of prefix and returns the
// suffix it got.
func createSeq(t *testing.T, conn *zk.Conn, prefix string) int32 {
	t.Helper()
	name, err := conn.Create(prefix, nil, zk.FlagSequence, openACL)
	if err != nil {
		t.Fatalf("create %s (sequential): %v", prefix, err)
	}
	return seqSuffix(t, name, prefix)
}

// reportedCversion is the cversion a server reports in a directory's Stat
// for the counter c and n children: ZooKeeper stores only the count of
// creates and derives the count of child changes from it, in int32.
func reportedCversion(c int32, n int32) int32 { return c*2 - n }

// digestMismatches reads zk_digest_mismatches_count from mntr.
func digestMismatches(t *testing.T, addr string) int {
	t.Helper()
	m, err := Mntr(ctxT(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m["zk_digest_mismatches_count"]
	if !ok {
		t.Fatalf("mntr of %s has no zk_digest_mismatches_count", addr)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("zk_digest_mismatches_count %q: %v", v, err)
	}
	return n
}

func checkDir(t *testing.T, conn *zk.Conn, dir string, counter, children int32) {
	t.Helper()
	_, st, err := conn.Get(dir)
	if err != nil {
		t.Fatalf("get %s: %v", dir, err)
	}
	if st.NumChildren != children || st.Cversion != reportedCversion(counter, children) {
		t.Errorf("%s: Stat.Cversion %d with %d children, want %d (counter %d) with %d",
			dir, st.Cversion, st.NumChildren, reportedCversion(counter, children), counter, children)
	}
}

// TestSeqCounters seeds directories just below the end of the
// sequential-node numbering and records what the server does at and past
// it (the behaviour WithSeqCounters documents): the same on ZooKeeper
// 3.8.0 and 3.9.3.
func TestSeqCounters(t *testing.T) {
	t.Parallel() // a server of its own: in make test's last step (ZooKeeper 3.9.3) these run alone, two at a time
	start := time.Now()
	cl := Start(t, WithSeqCounters(map[string]int32{
		"/limit/a": math.MaxInt32 - 3,
		"/limit/b": math.MaxInt32 - 10,
		"/":        100,
		"/low":     0,
	}))
	v, err := cl.ServerVersion(ctxT(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ZooKeeper %s; seeded Start took %v", v, time.Since(start))
	addr := cl.Addrs()[0]
	conn, _ := connect(t, cl.Addrs(), 5*time.Second, nil)

	checkDir(t, conn, "/limit/a", math.MaxInt32-3, 0)
	checkDir(t, conn, "/limit/b", math.MaxInt32-10, 0)
	// /limit counts the creation of its two seeded children.
	checkDir(t, conn, "/limit", 2, 2)
	if got := createSeq(t, conn, "/low/n-"); got != 0 {
		t.Errorf("/low/n-: suffix %d, want 0", got)
	}
	if got := createSeq(t, conn, "/r-"); got != 100 {
		t.Errorf("/r-: suffix %d, want 100", got)
	}

	t.Run("limit", func(t *testing.T) {
		for want := int32(math.MaxInt32 - 3); want < math.MaxInt32; want++ {
			if got := createSeq(t, conn, "/limit/a/n-"); got != want {
				t.Fatalf("suffix %d, want %d", got, want)
			}
		}
		// The seeded snapshot is consistent: no digest mismatch so far.
		if n := digestMismatches(t, addr); n != 0 {
			t.Errorf("zk_digest_mismatches_count %d before the limit, want 0", n)
		}
		_, before, err := conn.Get("/limit/a")
		if err != nil {
			t.Fatal(err)
		}
		if got := createSeq(t, conn, "/limit/a/n-"); got != math.MaxInt32 {
			t.Fatalf("suffix %d, want %d", got, math.MaxInt32)
		}
		// That create's new counter overflowed; the server kept the old one
		// and noticed that its expected tree digest does not match.
		if n := digestMismatches(t, addr); n != 1 {
			t.Errorf("zk_digest_mismatches_count %d after the create at the limit, want 1", n)
		}
		checkDir(t, conn, "/limit/a", math.MaxInt32, 4)
		for range 2 {
			if name, err := conn.Create("/limit/a/n-", nil, zk.FlagSequence, openACL); !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("create n- past the limit: %q, %v; want ErrNodeExists (n-%d again)", name, err, math.MaxInt32)
			}
		}
		if got := createSeq(t, conn, "/limit/a/m-"); got != math.MaxInt32 {
			t.Fatalf("m-: suffix %d, want %d", got, math.MaxInt32)
		}
		if name, err := conn.Create("/limit/a/m-", nil, zk.FlagSequence, openACL); !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("m- again: %q, %v; want ErrNodeExists", name, err)
		}
		checkDir(t, conn, "/limit/a", math.MaxInt32, 5)
		if n := digestMismatches(t, addr); n != 2 {
			t.Errorf("zk_digest_mismatches_count %d after two creates at the limit, want 2", n)
		}
		// The parent's pzxid moves with its counter only, so it stopped too.
		if _, st, err := conn.Get("/limit/a"); err != nil || st.Pzxid != before.Pzxid {
			t.Errorf("/limit/a: Pzxid %d after creates at the limit, want %d as before them (%v)", st.Pzxid, before.Pzxid, err)
		}
	})

	t.Run("multi", func(t *testing.T) {
		// The creates of one multi see the pending (overflowed) counter of
		// the ones before them.
		var ops []any
		for range 3 {
			ops = append(ops, &zk.CreateRequest{Path: "/limit/a/p-", Flags: zk.FlagSequence, Acl: openACL})
		}
		res, err := conn.Multi(ops...)
		if err != nil {
			t.Fatalf("multi: %v", err)
		}
		var got []int32
		for _, r := range res {
			got = append(got, seqSuffix(t, r.String, "/limit/a/p-"))
		}
		if want := []int32{math.MaxInt32, math.MinInt32, math.MinInt32 + 1}; !slices.Equal(got, want) {
			t.Errorf("multi's suffixes %v, want %v", got, want)
		}
		checkDir(t, conn, "/limit/a", math.MaxInt32, 8)
	})

	t.Run("pipelined", func(t *testing.T) {
		// Concurrent creates on one session are pipelined: those the server
		// prepares while an earlier one is in flight see its overflowed
		// counter; the others get the stuck counter, and fail if the name
		// is taken. Which are which depends on timing.
		const n = 8
		type result struct {
			name string
			err  error
		}
		results := make(chan result, n)
		for range n {
			go func() {
				name, err := conn.Create("/limit/a/q-", nil, zk.FlagSequence|zk.FlagEphemeral, openACL)
				results <- result{name, err}
			}()
		}
		var got []int32
		for range n {
			r := <-results
			switch {
			case r.err == nil:
				got = append(got, seqSuffix(t, r.name, "/limit/a/q-"))
			case errors.Is(r.err, zk.ErrNodeExists):
			default:
				t.Errorf("create q-: %v", r.err)
			}
		}
		slices.Sort(got)
		t.Logf("pipelined creates' suffixes: %v (%d of %d failed with NodeExists)", got, n-len(got), n)
		if len(got) == 0 || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("suffixes %v: want at least one, all distinct", got)
		}
		for _, s := range got {
			// The stuck counter, or one of the n overflowed ones from
			// math.MinInt32 up (seqSuffix rejects what is not an int32).
			if s != math.MaxInt32 && s >= math.MinInt32+n {
				t.Errorf("suffix %d: want %d, or from %d to %d", s, math.MaxInt32, math.MinInt32, math.MinInt32+n-1)
			}
		}
	})

	t.Run("deletes", func(t *testing.T) {
		// A delete does not advance the counter (the Stat's Cversion, which
		// counts child changes, does rise with it).
		base := int32(math.MaxInt32 - 10)
		for i := range int32(3) {
			want := base + i
			name, err := conn.Create("/limit/b/d-", nil, zk.FlagSequence, openACL)
			if err != nil {
				t.Fatal(err)
			}
			if got := seqSuffix(t, name, "/limit/b/d-"); got != want {
				t.Fatalf("suffix %d after %d create+delete pairs, want %d", got, i, want)
			}
			if err := conn.Delete(name, -1); err != nil {
				t.Fatal(err)
			}
			checkDir(t, conn, "/limit/b", want+1, 0)
		}
		if got := createSeq(t, conn, "/limit/b/d-"); got != base+3 {
			t.Fatalf("suffix %d, want %d", got, base+3)
		}
	})

	t.Run("restart", func(t *testing.T) {
		// The counters survive a restart (snapshot and transaction log).
		if err := cl.Restart(0); err != nil {
			t.Fatal(err)
		}
		conn, _ := connect(t, cl.Addrs(), 5*time.Second, nil)
		if name, err := conn.Create("/limit/a/n-", nil, zk.FlagSequence, openACL); !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("n- after restart: %q, %v; want ErrNodeExists", name, err)
		}
		if got := createSeq(t, conn, "/limit/a/z-"); got != math.MaxInt32 {
			t.Errorf("z- after restart: suffix %d, want %d", got, math.MaxInt32)
		}
		if got := createSeq(t, conn, "/limit/b/d-"); got != math.MaxInt32-6 {
			t.Errorf("d- after restart: suffix %d, want %d", got, math.MaxInt32-6)
		}
	})
}

// TestSeqCountersEnsemble: every member of an ensemble starts from the
// seeded snapshot, and the counter goes on whichever server a client uses.
func TestSeqCountersEnsemble(t *testing.T) {
	t.Parallel() // a server of its own: in make test's last step (ZooKeeper 3.9.3) these run alone, two at a time
	cl := Start(t, WithEnsemble(3), WithSeqCounters(map[string]int32{"/limit/a": math.MaxInt32 - 1}))
	addrs := cl.Addrs()
	for i, want := range []int32{math.MaxInt32 - 1, math.MaxInt32} {
		conn, _ := connect(t, addrs[i:i+1], 5*time.Second, nil)
		if got := createSeq(t, conn, "/limit/a/n-"); got != want {
			t.Fatalf("via server %d: suffix %d, want %d", i, got, want)
		}
	}
	conn, _ := connect(t, addrs[2:], 5*time.Second, nil)
	if name, err := conn.Create("/limit/a/n-", nil, zk.FlagSequence, openACL); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("via server 2, past the limit: %q, %v; want ErrNodeExists", name, err)
	}
}

// TestSeqCountersUnsupported: an external ensemble cannot be seeded, and
// Start says so rather than starting a server without the counters.
func TestSeqCountersUnsupported(t *testing.T) {
	t.Setenv(EnvServers, Shared(t).Addrs()[0])
	opt := WithSeqCounters(map[string]int32{"/limit/a": 5})
	_, err := Launch(context.Background(), opt)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), EnvServers) {
		t.Fatalf("Launch: %v; want ErrUnsupported naming %s", err, EnvServers)
	}
	rec := &fatalRecorder{TB: t}
	if c := Start(rec, opt); c != nil {
		t.Fatal("Start returned a cluster")
	}
	if !strings.Contains(rec.msg, "WithSeqCounters") || !strings.Contains(rec.msg, EnvServers) {
		t.Fatalf("Start's Fatalf message: %q", rec.msg)
	}
}

// TestSeqCountersNoProvider: without a local install the container provider
// is not tried either (it cannot be seeded); the error says both.
func TestSeqCountersNoProvider(t *testing.T) {
	t.Setenv(EnvServers, "")
	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", t.TempDir())
	_, err := Launch(context.Background(), WithSeqCounters(map[string]int32{"/a": 1}))
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), InstallHint) || !strings.Contains(err.Error(), "docker: not tried") {
		t.Fatalf("Launch: %v; want ErrNoServer with the hint, docker not tried", err)
	}
}

// TestSeqCountersInvalid: bad paths and counters fail Launch, before a
// server starts or, for a counter below the seeded children's count, in
// the seeding program.
func TestSeqCountersInvalid(t *testing.T) {
	t.Setenv(EnvServers, "")
	for _, m := range []map[string]int32{
		{"limit/a": 1},
		{"/limit/a/": 1},
		{"/limit//a": 1},
		{"/limit/../a": 1},
		{"/zookeeper/x": 1},
		{"/zookeeper": 1},
		{"/limit/a": -1},
		{"/limit/a\x01b": 1},
		{"/limit/a\x7fb": 1},
		{"/limit/a\ufff5b": 1},
		{"/limit/a\xffb": 1},
		{"/limit/\U0001F600": 1},
	} {
		c, err := Launch(context.Background(), WithSeqCounters(m))
		if err == nil {
			c.Close()
			t.Errorf("%v: Launch succeeded", m)
			continue
		}
		if !strings.Contains(err.Error(), "WithSeqCounters") || errors.Is(err, ErrNoServer) {
			t.Errorf("%v: %v", m, err)
		}
	}
	c, err := Launch(context.Background(), WithSeqCounters(map[string]int32{"/p": 1, "/p/a": 5, "/p/b": 5}))
	if err == nil {
		c.Close()
		t.Fatal("a counter below its seeded children's count: Launch succeeded")
	}
	if !strings.Contains(err.Error(), "/p: counter 1 is below the 2") {
		t.Fatalf("a counter below its seeded children's count: %v", err)
	}
}

// TestSeqCountersNeedJDK: a Java runtime without the compiler module (a
// JRE, here the JDK's java limited to the java.se modules) cannot run the
// seeding program; the error says to install a JDK.
func TestSeqCountersNeedJDK(t *testing.T) {
	in, err := findInstall()
	if err != nil {
		t.Fatalf("this test needs a local install: %v: %s", err, InstallHint)
	}
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s --limit-modules java.se \"$@\"\n", in.java)
	if err := os.WriteFile(filepath.Join(home, "bin", "java"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvServers, "")
	t.Setenv("JAVA_HOME", home)
	c, err := Launch(context.Background(), WithSeqCounters(map[string]int32{"/a": 1}))
	if err == nil {
		c.Close()
		t.Fatal("Launch succeeded without jdk.compiler")
	}
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), JDKHint) {
		t.Fatalf("Launch: %v; want ErrNoServer with JDKHint", err)
	}
}

// TestSeqCountersLocale: a non-ASCII path is seeded under its own name
// whatever the locale the JVM decodes its arguments in (under C or POSIX a
// path given as an argument came out as another one, silently).
func TestSeqCountersLocale(t *testing.T) {
	t.Setenv("LANG", "C")
	t.Setenv("LC_ALL", "C")
	const dir = "/locks/über-été"
	cl := Start(t, WithSeqCounters(map[string]int32{dir: math.MaxInt32 - 2}))
	conn, _ := connect(t, cl.Addrs(), 5*time.Second, nil)
	checkDir(t, conn, dir, math.MaxInt32-2, 0)
}
