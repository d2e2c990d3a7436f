package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// The cache drivers' protocol: ours (cache_driver.go, this binary again)
// and Curator's (peers/CacheBench.java) each run as a process of their
// own, connect a session, print {"ready":true}, then answer one line per
// command on stdin with one JSON line on stdout:
//
//   - "load root=R": on that session, start a cache of R, time it from its
//     start to initialized, measure the heap with it loaded less before
//     it, close it: cacheLoadReply;
//   - "release": close that session (and with it what closed caches left
//     on the server: Curator 5.4.0 leaves a CuratorCache's persistent
//     watch, which would notify that session during the other peer's write
//     phases): {"released":true};
//   - "watch root=R": on a new session, closed after the end mark, start a
//     cache of R and wait until it is loaded;
//     print {"mark":"start"} and wait for a line ("go": zkbench has sampled
//     the meter), record every change event, then read "end seq=K" and
//     wait until write K (the last) is seen; print {"mark":"end"}, wait for
//     a line, close the cache: cacheWatchReply.
//
// A command that fails answers {"error":"..."}.

// cacheLoadReply is the answer to "load".
type cacheLoadReply struct {
	LoadMs    float64 `json:"load_ms"`    // from the cache's start to initialized
	Nodes     int     `json:"nodes"`      // created events before initialized
	HeapBytes int64   `json:"heap_bytes"` // heap with the cache loaded, less before
	HeapNoise int64   `json:"heap_noise"` // spread of the settled samples of one measurement
	Error     string  `json:"error,omitempty"`
}

// cacheWatchReply is the answer to "watch".
type cacheWatchReply struct {
	Events int              `json:"events"` // change events carrying a write's stamp
	Seen   int              `json:"seen"`   // distinct writes seen
	LatUs  []int64          `json:"lat_us"` // receive − send per write seen, at its first sighting, µs
	Final  map[string]int64 `json:"final"`  // node below the root → the last write seen
	Error  string           `json:"error,omitempty"`
}

// cacheDriver is one peer's driver process.
type cacheDriver struct {
	*extPeer
	res CacheResult
	lat []time.Duration // of every write phase
}

// startCacheDrivers starts ours and Curator's drivers, connected to
// servers; Curator's is skipped, with the reason in the log, when Java or
// Curator is missing. b closes them.
func startCacheDrivers(ctx context.Context, b *bench, servers string) ([]*cacheDriver, error) {
	tmp, err := os.MkdirTemp("", "zkbench-cache-")
	if err != nil {
		return nil, err
	}
	b.onClose(func() { os.RemoveAll(tmp) })
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ours, err := startDriverProc(ctx, "ours", tmp, []string{exe}, []string{cacheDriverEnv + "=" + servers})
	if err != nil {
		return nil, err
	}
	b.onClose(func() { ours.Close() })
	ds := []*cacheDriver{{extPeer: ours}}
	argv, err := cacheBenchArgv(ctx, tmp, servers)
	if err == nil {
		var cur *extPeer
		if cur, err = startDriverProc(ctx, "curator", tmp, argv, nil); err == nil {
			b.onClose(func() { cur.Close() })
			ds = append(ds, &cacheDriver{extPeer: cur})
		}
	}
	if err != nil {
		logf("SKIPPING curator: %v", err)
	}
	return ds, nil
}

// cacheBenchArgv compiles peers/CacheBench.java in dir and returns the
// command that runs it.
func cacheBenchArgv(ctx context.Context, dir, servers string) ([]string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: no java on PATH (apt-get install -y default-jdk-headless)", errNotInstalled)
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, fmt.Errorf("%w: no javac on PATH (apt-get install -y default-jdk-headless)", errNotInstalled)
	}
	if err := writeSources(dir); err != nil {
		return nil, err
	}
	cp, err := curatorClasspath(ctx, javac, dir, "CacheBench.java")
	if err != nil {
		return nil, err
	}
	return []string{java, "-Xmx1g", "-cp", cp, "CacheBench", "--servers", servers}, nil
}

// startDriverProc starts argv (with env added), its stderr to
// dir/name.log, and waits for its ready line.
func startDriverProc(ctx context.Context, name, dir string, argv, env []string) (*extPeer, error) {
	logPth := filepath.Join(dir, name+".log")
	lf, err := os.Create(logPth)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = lf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &extPeer{name: name, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), logf: lf, logPth: logPth}
	p.out.Buffer(make([]byte, 1<<20), 256<<20) // a watch reply holds every write's latency
	line, err := p.readLine(ctx, 2*time.Minute)
	if err != nil || !strings.Contains(line, `"ready"`) {
		p.Close()
		return nil, fmt.Errorf("%s cache driver did not start (%q, %v); its log:\n%s", name, line, err, p.logTail())
	}
	return p, nil
}

// call sends line and decodes the answer into v; an answer with an error
// is an error, with the driver's log.
func (d *cacheDriver) call(ctx context.Context, line string, v any) error {
	if _, err := fmt.Fprintln(d.stdin, line); err != nil {
		return err
	}
	return d.answer(ctx, v)
}

// answer reads one JSON line into v.
func (d *cacheDriver) answer(ctx context.Context, v any) error {
	line, err := d.readLine(ctx, 15*time.Minute)
	if err != nil {
		return fmt.Errorf("%s: %v; driver log:\n%s", d.name, err, d.logTail())
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(line), &e) == nil && e.Error != "" {
		return fmt.Errorf("%s: %s", d.name, e.Error)
	}
	if err := json.Unmarshal([]byte(line), v); err != nil {
		return fmt.Errorf("%s: bad driver line %.200q: %v", d.name, line, err)
	}
	return nil
}

// expectMark reads a {"mark":name} line.
func (d *cacheDriver) expectMark(ctx context.Context, name string) error {
	var mk struct {
		Mark string `json:"mark"`
	}
	if err := d.answer(ctx, &mk); err != nil {
		return err
	}
	if mk.Mark != name {
		return fmt.Errorf("%s: mark %q, want %q", d.name, mk.Mark, name)
	}
	return nil
}

// load runs one "load" and checks that the cache held want nodes.
func (d *cacheDriver) load(ctx context.Context, root string, want int) (cacheLoadReply, error) {
	var r cacheLoadReply
	if err := d.call(ctx, "load root="+root, &r); err != nil {
		return r, err
	}
	if r.Nodes != want {
		return r, fmt.Errorf("%s: the cache loaded %d nodes, want %d", d.name, r.Nodes, want)
	}
	return r, nil
}

// watch runs the write phase on d: the driver loads a cache, w writes
// unmeasured for the warm-up (stamped 0, which drivers ignore), then m
// samples the driver's CPU (and the server's) over the measured writes
// until the driver has seen the last; it adds the phase to d.res.
func (d *cacheDriver) watch(ctx context.Context, w *cacheWriter, o cacheOptions, m meter, round int) error {
	if _, err := fmt.Fprintln(d.stdin, "watch root="+w.root); err != nil {
		return err
	}
	if err := d.expectMark(ctx, "start"); err != nil {
		return err
	}
	if _, err := w.run(ctx, min(cacheWarmup, o.writeTime), false); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond) // the warm-up's events delivered
	m.clientPID = d.cmd.Process.Pid
	if mn, err := zktest.Mntr(ctx, m.mntr); err == nil { // the driver's (2: data and child tables) and zkbench's
		logf("%s write phase: the server holds %s watches", d.name, mn["zk_watch_count"])
	}
	start, err := m.begin(ctx)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(d.stdin, "go"); err != nil {
		return err
	}
	st, werr := w.run(ctx, o.writeTime, true)
	if werr != nil {
		st.lastSeq = 0 // the driver waits for nothing
	}
	if _, err := fmt.Fprintf(d.stdin, "end seq=%d\n", st.lastSeq); err != nil {
		return err
	}
	if err := d.expectMark(ctx, "end"); err != nil {
		return err
	}
	ph, err := m.end(ctx, start)
	if err != nil {
		return err
	}
	var r cacheWatchReply
	if err := d.call(ctx, "go", &r); err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("writer: %w", werr)
	}
	p, lat := newPhase(round, st, r, ph)
	d.res.Phases = append(d.res.Phases, p)
	d.lat = append(d.lat, lat...)
	return nil
}
