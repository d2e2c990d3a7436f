package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// zkbench -cache N measures our cache (package cache, CacheTree mode)
// against Apache Curator's CuratorCache (peers/CacheBench.java), each in a
// driver process of its own (cache_peer.go) with one session, on one tree
// of N leaves (cacheFanout per directory, cacheDataSize bytes of data
// each) populated once, outside the measured phases:
//
//   - initial load: from the cache's start (cache.New; CuratorCache.start)
//     to initialized (CacheInitialized; the listener's initialized), one
//     unmeasured load per peer (shown apart: cold code, a fresh session),
//     then -rounds loads each on the same session, peer order rotated per
//     round, the median;
//   - heap per node: in the same loads, the driver's heap after a full GC
//     with the cache loaded less before it, divided by the nodes held
//     (leaves, directories, root); Go: HeapAlloc after runtime.GC; Java:
//     Runtime totalMemory − freeMemory after System.gc(), five times, the
//     last (noise: the spread of the last three);
//   - events under writes: -rounds write phases per peer, peer order
//     rotated per round; in each, a writer (a session of zkbench's own)
//     sets random leaves at -cache-rate writes/s for -cache-time, each
//     write's data its seq and send time, after an unmeasured warm-up of
//     the same (cacheWarmup); the driver records, per write seen, receive
//     − send time; then the fraction of writes seen, whether every written
//     leaf's last write was seen, and the CPU time of the driver and of the
//     server and the server's packets (meter) from the first write until
//     the driver saw the last.

// cacheOptions are the -cache flags.
type cacheOptions struct {
	nodes     int           // leaves of the tree; 0: not the cache workload
	rate      int           // writes/s of the write phase
	writeTime time.Duration // length of the write phase
}

const (
	cacheFanout   = 100             // leaves per directory
	cacheDataSize = 100             // bytes of every node's data
	cacheWarmup   = 2 * time.Second // unmeasured writes before each write phase (at most -cache-time)
)

// registerCacheFlags defines the -cache flags on the command line.
func registerCacheFlags(c *cacheOptions) {
	flag.IntVar(&c.nodes, "cache", 0, "measure only the caches, ours (package cache) against Curator's CuratorCache, on a tree of this many leaves, e.g. 10000: initial load (median of -rounds), heap per node, event latency under -cache-rate writes/s for -cache-time")
	flag.IntVar(&c.rate, "cache-rate", 500, "-cache: writes/s of the write phase")
	flag.DurationVar(&c.writeTime, "cache-time", 10*time.Second, "-cache: length of the write phase")
}

// check refuses -cache flags that would measure nothing.
func (c cacheOptions) check() error {
	switch {
	case c.nodes < 0:
		return fmt.Errorf("-cache %d is negative", c.nodes)
	case c.nodes > 0 && c.rate < 1:
		return fmt.Errorf("-cache-rate %d: at least 1", c.rate)
	case c.nodes > 0 && c.writeTime < time.Second:
		return fmt.Errorf("-cache-time %v: at least 1s", c.writeTime)
	}
	return nil
}

// CacheResult is one peer's result of the cache workload: one JSON line.
type CacheResult struct {
	Type     string `json:"type"` // "cache"
	Peer     string `json:"peer"`
	Workload string `json:"workload"` // "cache-N"
	Nodes    int    `json:"nodes"`    // leaves of the tree
	Held     int    `json:"held"`     // nodes a cache holds: leaves, directories, root
	// FirstLoadMs and FirstHeapPerNode are the first load's (unmeasured:
	// cold code, a fresh session, whose growth its heap figure includes).
	// LoadMs and HeapPerNode are every measured load's, in round order, on
	// the same session; the medians follow. HeapNoise is the largest
	// spread of the settled heap samples of one measurement, in bytes.
	FirstLoadMs       float64   `json:"first_load_ms"`
	FirstHeapPerNode  float64   `json:"first_heap_b_per_node"`
	LoadMs            []float64 `json:"load_ms"`
	HeapPerNode       []float64 `json:"heap_b_per_node"`
	HeapNoise         int64     `json:"heap_noise_b"`
	LoadMsMedian      float64   `json:"load_ms_median"`
	HeapPerNodeMedian float64   `json:"heap_b_per_node_median"`
	// The write phases, one per round and peer: every phase's figures,
	// then, over them all, the writes made (the final ones included), seen
	// (in Events change events) and the leaves written whose last write was
	// seen; the latency percentiles of every write seen; the medians of the
	// phases' rate, CPU and packets.
	Phases      []CachePhase `json:"phases"`
	WritesAsked int          `json:"writes_asked_per_s"`
	Writes      int          `json:"writes"`
	WritesPerS  float64      `json:"writes_per_s"`
	Seen        int          `json:"seen"`
	Events      int          `json:"events"`
	P50us       float64      `json:"p50_us"`
	P99us       float64      `json:"p99_us"`
	MaxUs       float64      `json:"max_us"`
	LastOK      int          `json:"last_ok"`
	LastOf      int          `json:"last_of"`
	ClientCPUs  float64      `json:"cli_cpu_s"`
	ServerCPUs  float64      `json:"srv_cpu_s"`
	Packets     float64      `json:"packets"`
	Error       string       `json:"error,omitempty"`
}

// CachePhase is one write phase of one peer.
type CachePhase struct {
	Round      int     `json:"round"`
	Writes     int     `json:"writes"` // made, the final one included
	WritesPerS float64 `json:"writes_per_s"`
	Seen       int     `json:"seen"`
	Events     int     `json:"events"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	MaxUs      float64 `json:"max_us"`
	LastOK     int     `json:"last_ok"`
	LastOf     int     `json:"last_of"`
	// ClientCPUs is the driver process's CPU time (user + system) over the
	// phase, ServerCPUs the server's (-1: not measured); Packets the
	// server's packets over it (the writer's, the cache's, the pings; -1:
	// not counted).
	ClientCPUs float64 `json:"cli_cpu_s"`
	ServerCPUs float64 `json:"srv_cpu_s"`
	Packets    int64   `json:"packets"`
}

// newPhase returns the figures of one write phase: what the writer made,
// what the driver saw, what the meter measured; and its latencies.
func newPhase(round int, st writeStats, w cacheWatchReply, ph phase) (CachePhase, []time.Duration) {
	p := CachePhase{Round: round, Writes: st.writes, WritesPerS: float64(st.writes) / st.elapsed.Seconds(),
		Seen: w.Seen, Events: w.Events, LastOf: len(st.last), Packets: ph.packets}
	lat := make([]time.Duration, len(w.LatUs))
	for i, us := range w.LatUs {
		lat[i] = time.Duration(us) * time.Microsecond
	}
	p.P50us, p.P99us, p.MaxUs = percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
	for leaf, seq := range st.last {
		if w.Final[leaf] == seq {
			p.LastOK++
		}
	}
	secs := func(d time.Duration) float64 {
		if d < 0 {
			return -1
		}
		return d.Seconds()
	}
	p.ClientCPUs, p.ServerCPUs = secs(ph.cli), secs(ph.srv)
	return p, lat
}

// summarize sets r's write figures from its phases and lat, the
// latencies of every phase.
func (r *CacheResult) summarize(lat []time.Duration) {
	var rate, cli, srv, pkts []float64
	for _, p := range r.Phases {
		r.Writes, r.Seen, r.Events = r.Writes+p.Writes, r.Seen+p.Seen, r.Events+p.Events
		r.LastOK, r.LastOf = r.LastOK+p.LastOK, r.LastOf+p.LastOf
		rate, cli, srv = append(rate, p.WritesPerS), append(cli, p.ClientCPUs), append(srv, p.ServerCPUs)
		pkts = append(pkts, float64(p.Packets))
	}
	r.P50us, r.P99us, r.MaxUs = percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1)
	r.WritesPerS, r.ClientCPUs, r.ServerCPUs, r.Packets = medianOf(rate), medianOf(cli), medianOf(srv), medianOf(pkts)
}

// runCache is zkbench -cache: it prints the table (and writes the JSON
// lines asked for).
func runCache(ctx context.Context, o options) error {
	table, jsonW, closeOut, err := openOutputs(&o)
	if err != nil {
		return err
	}
	defer closeOut()
	return cacheBench(ctx, o, table, jsonW)
}

// cacheBench measures o.cache on every driver and writes the table to
// table, the results as JSON lines to jsonW (if not nil).
func cacheBench(ctx context.Context, o options, table, jsonW io.Writer) error {
	b := &bench{o: o}
	defer b.close()
	addrs, serverPID, err := b.server(ctx)
	if err != nil {
		return err
	}
	m := meter{mntr: addrs[0], serverPID: serverPID}
	if err := m.calibrate(ctx); err != nil {
		return fmt.Errorf("mntr (four-letter words must be allowed): %w", err)
	}
	server := "ZooKeeper ?"
	if mn, err := zktest.Mntr(ctx, addrs[0]); err == nil {
		server, _, _ = strings.Cut("ZooKeeper "+mn["zk_version"], "-")
	}
	if loopback(addrs) {
		server += ", loopback"
	}
	if err := b.makeRoot(addrs); err != nil {
		return err
	}
	conn, _, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	b.onClose(conn.Close)
	start := time.Now()
	tree, err := populate(conn, b.root+"/cache", o.cache.nodes)
	if err != nil {
		return fmt.Errorf("populating %s: %w", b.root+"/cache", err)
	}
	logf("populated %s: %d leaves in %d directories (%d nodes) in %v", tree.root, len(tree.leaves), tree.dirs, tree.held(), time.Since(start).Round(time.Millisecond))
	ds, err := startCacheDrivers(ctx, b, strings.Join(addrs, ","))
	if err != nil {
		return err
	}
	for _, d := range ds {
		d.res = CacheResult{Type: "cache", Peer: d.name, Workload: fmt.Sprintf("cache-%d", len(tree.leaves)),
			Nodes: len(tree.leaves), Held: tree.held(), WritesAsked: o.cache.rate}
	}
	measureLoads(ctx, ds, tree, o.rounds)
	w := &cacheWriter{cacheTree: tree, conn: conn, rate: o.cache.rate}
	if err := measureWrites(ctx, ds, w, o, m); err != nil {
		return err
	}
	var rs []CacheResult
	for _, d := range ds {
		rs = append(rs, d.res)
		if jsonW != nil {
			line, _ := json.Marshal(d.res)
			fmt.Fprintf(jsonW, "%s\n", line)
		}
	}
	printCacheTable(table, o, server, tree, rs)
	return nil
}

// measureLoads loads a cache of the tree once per driver unmeasured, then
// rounds times each, the driver order rotated by one per round, and sets
// each driver's load figures (or its error).
func measureLoads(ctx context.Context, ds []*cacheDriver, tree cacheTree, rounds int) {
	for _, d := range ds {
		r, err := d.load(ctx, tree.root, tree.held())
		if err != nil {
			d.res.Error = "first load: " + err.Error()
			continue
		}
		d.res.FirstLoadMs, d.res.FirstHeapPerNode = r.LoadMs, float64(r.HeapBytes)/float64(tree.held())
		logf("first   %-7s load %8.1f ms  heap %7.1f B/node (noise %d B), a fresh session, unmeasured", d.name, r.LoadMs, d.res.FirstHeapPerNode, r.HeapNoise)
	}
	for round := range rounds {
		order := slices.Concat(ds[round%len(ds):], ds[:round%len(ds)])
		for _, d := range order {
			if d.res.Error != "" || ctx.Err() != nil {
				continue
			}
			r, err := d.load(ctx, tree.root, tree.held())
			if err != nil {
				d.res.Error = err.Error()
				logf("round %d %s load: ERROR %v", round+1, d.name, err)
				continue
			}
			perNode := float64(r.HeapBytes) / float64(tree.held())
			d.res.LoadMs = append(d.res.LoadMs, r.LoadMs)
			d.res.HeapPerNode = append(d.res.HeapPerNode, perNode)
			d.res.HeapNoise = max(d.res.HeapNoise, r.HeapNoise)
			logf("round %d %-7s load %8.1f ms  heap %7.1f B/node (noise %d B)", round+1, d.name, r.LoadMs, perNode, r.HeapNoise)
		}
	}
	for _, d := range ds {
		d.res.LoadMsMedian, d.res.HeapPerNodeMedian = medianOf(d.res.LoadMs), medianOf(d.res.HeapPerNode)
		var released map[string]bool
		if err := d.call(ctx, "release", &released); err != nil && d.res.Error == "" {
			d.res.Error = "release: " + err.Error()
		}
	}
}

// measureWrites runs -rounds write phases on every driver, the driver
// order rotated by one per round, and sets each driver's write figures (or
// its error).
func measureWrites(ctx context.Context, ds []*cacheDriver, w *cacheWriter, o options, m meter) error {
	for round := range o.rounds {
		for _, d := range slices.Concat(ds[round%len(ds):], ds[:round%len(ds)]) {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if d.res.Error != "" {
				continue
			}
			if err := d.watch(ctx, w, o.cache, m, round+1); err != nil {
				d.res.Error = err.Error()
				logf("round %d %s write phase: ERROR %v", round+1, d.name, err)
				continue
			}
			p := d.res.Phases[len(d.res.Phases)-1]
			logf("round %d %-7s %d writes at %.0f/s, %d seen, latency p50 %.2f ms p99 %.2f ms max %.2f ms, last writes %d/%d, cpu %s/%s s, %d packets",
				round+1, d.name, p.Writes, p.WritesPerS, p.Seen, p.P50us/1000, p.P99us/1000, p.MaxUs/1000, p.LastOK, p.LastOf,
				secsCell(p.ClientCPUs), secsCell(p.ServerCPUs), p.Packets)
		}
	}
	for _, d := range ds {
		d.res.summarize(d.lat)
	}
	return nil
}

// secsCell formats CPU seconds; negative is not measured.
func secsCell(s float64) string {
	if s < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", s)
}

// medianOf returns the median of v (0 for none).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
