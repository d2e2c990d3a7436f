package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// curatorInstalled reports whether the Curator driver can run here.
func curatorInstalled() bool {
	_, errJava := exec.LookPath("java")
	_, errJavac := exec.LookPath("javac")
	_, errJar := os.Stat("/usr/share/java/curator-recipes.jar")
	return errJava == nil && errJavac == nil && errJar == nil
}

// TestCacheMode runs -cache on a tiny tree (200 leaves, one round, 1 s of
// writes) against a real server: the table has both peers side by side
// (Curator when installed: else it is reported and left out) and every
// figure, each peer's JSON line saw every write, or at least the last one
// of every leaf, and the run leaves no node behind.
func TestCacheMode(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := options{servers: strings.Join(cl.Addrs(), ","), rounds: 1,
		cache: cacheOptions{nodes: 200, rate: 200, writeTime: time.Second}}
	var table, lines strings.Builder
	if err := cacheBench(ctx, o, &table, &lines); err != nil {
		t.Fatal(err)
	}
	t.Logf("table:\n%s", table.String())
	peers := []string{"ours"}
	if curatorInstalled() {
		peers = append(peers, "curator")
	}
	results := map[string]CacheResult{}
	sc := bufio.NewScanner(strings.NewReader(lines.String()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r CacheResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("JSON line %.200q: %v", sc.Text(), err)
		}
		results[r.Peer] = r
	}
	for _, p := range peers {
		r, ok := results[p]
		switch {
		case !ok:
			t.Errorf("%s: no JSON line", p)
		case r.Error != "":
			t.Errorf("%s: %s", p, r.Error)
		case r.Type != "cache" || r.Workload != "cache-200" || r.Nodes != 200 || r.Held != 203:
			t.Errorf("%s: %s %s, %d leaves, %d held; want cache cache-200, 200, 203 (root, 2 directories)", p, r.Type, r.Workload, r.Nodes, r.Held)
		case len(r.LoadMs) != 1 || r.LoadMsMedian <= 0 || r.HeapPerNodeMedian <= 0 || len(r.Phases) != 1:
			t.Errorf("%s: implausible loads %v, heap %v B/node, %d write phases", p, r.LoadMs, r.HeapPerNode, len(r.Phases))
		case r.Writes < 150 || r.Seen == 0 || r.LastOK != r.LastOf || r.P50us <= 0 || r.MaxUs < r.P99us || r.ClientCPUs <= 0 || r.Packets <= 0:
			t.Errorf("%s: implausible write phase %+v", p, r.Phases[0])
		}
	}
	for _, want := range append([]string{"metric", "ours/curator", "initial load, ms (median)", "heap, B per node held (median)",
		"event latency p99, ms", "writes seen, %", "leaves whose last write was seen", "client CPU, s per write phase",
		"lower is better"}, peers...) {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if len(peers) == 2 && !strings.Contains(table.String(), "×") {
		t.Error("the table has no ratio ours/curator")
	}
	in := zktest.Inspect(t, cl)
	runs, _, err := in.Conn().Children("/zkbench")
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	for _, r := range runs {
		if ds, _, err := in.Conn().Children("/zkbench/" + r); err == nil && slices.Contains(ds, "cache") {
			t.Errorf("/zkbench/%s/cache left behind", r)
		}
	}
}

// TestCacheHelpers: a write's stamp reads back, data that is no stamp (the
// populated data, a warm-up write) is ignored, and bad -cache flags are
// refused.
func TestCacheHelpers(t *testing.T) {
	d := stampData(42)
	if len(d) != cacheDataSize {
		t.Errorf("stamp of %d bytes, want %d", len(d), cacheDataSize)
	}
	if seq, sent, ok := parseStamp(d); !ok || seq != 42 || time.Since(time.Unix(0, sent)) > time.Minute {
		t.Errorf("parseStamp = %d, %d, %t", seq, sent, ok)
	}
	for _, no := range [][]byte{stampData(0), []byte("...."), nil} {
		if _, _, ok := parseStamp(no); ok {
			t.Errorf("parseStamp(%q) ok", no)
		}
	}
	if err := (cacheOptions{}).check(); err != nil {
		t.Errorf("no -cache refused: %v", err)
	}
	for c, want := range map[cacheOptions]string{
		{nodes: -1}: "-cache -1",
		{nodes: 10, rate: 0, writeTime: time.Second}:                 "-cache-rate 0",
		{nodes: 10, rate: 5, writeTime: 100 * time.Millisecond}:      "-cache-time 100ms",
		{nodes: 10, rate: 5, writeTime: 500 * time.Microsecond * 10}: "at least 1s",
	} {
		if err := c.check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want an error with %q", c, err, want)
		}
	}
	if m := medianOf([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("medianOf = %v, want 2.5", m)
	}
}
