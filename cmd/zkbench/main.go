// Command zkbench measures this module's mutex against its peers on one
// ZooKeeper server, in one run, with the same workloads:
//
//   - ours: mutex.New (package mutex of this module);
//   - zk: go-zookeeper's built-in zk.Lock;
//   - curator: Apache Curator's InterProcessMutex (Java, Debian package
//     libcurator-recipes-java), driven by peers/Bench.java;
//   - kazoo: kazoo's Lock (Python, Debian package python3-kazoo), driven by
//     peers/kazoo_bench.py;
//
// and the library's other backends, each on its own server started by its
// test harness (backendpeers.go), with the uncontended and contended
// workloads only:
//
//   - etcd: backend/etcdlock;
//   - pg: backend/pglock (PostgreSQL advisory locks);
//   - redis: backend/redislock (one Redis server);
//   - k8s: backend/k8slease (one kube-apiserver over one etcd member).
//
// Workloads: uncontended (1 client, acquire+release in a loop), contended
// (8 and 32 clients on separate sessions, each acquire → tiny critical
// section → release), and waiters (2, 10, 100, 1000 contenders on separate
// sessions ("sep") or all on one session ("one"), in repeated cycles on the
// same sessions: a holder takes the lock, the W contenders queue behind it,
// then a chain of W hand-offs; ceil(-handoffs / W) cycles, at least one,
// fewer if -duration × 10 of wall time passes first). For each it reports
// acquisitions/s (for waiters: hand-offs / the summed hand-off time, each
// cycle's from the start of the holder's release to the return of the last
// waiter's acquire), acquire latency p50/p99 (for waiters: hand-off
// latency, from the start of the previous holder's release to the return
// of the next acquire, over every cycle), server packets per acquisition
// (zk_packets_received + zk_packets_sent from mntr, over the measured phase,
// less what the mntr exchange itself counts; for waiters, the sum of the
// cycles' hand-off phases), CPU time per
// acquisition over the same phases of the process running the peer's
// clients and of the ZooKeeper server (when zkbench started it; meter.go)
// and, for waiters, client heap bytes per queued waiter (first cycle).
//
// -latency D puts a proxy adding D in each direction between every
// ZooKeeper peer and the server (proxy.go: zkbench itself, started again
// in a hidden proxy mode, so the proxy's CPU is not the Go peers'); the
// other backends' peers always connect directly.
//
// The server is warmed first (every peer runs a short loop, not recorded).
// Then it runs -rounds rounds; in each, every workload is run by every peer
// back to back, the peer order rotated by one per round, so that ratios are
// measured under the same machine noise. The table shows medians over the
// rounds; -json writes every round and every median as JSON lines. With
// -out DIR, the JSON lines go to DIR/zkbench.jsonl (unless -json names
// another file) and a chart per workload, acquisitions/s and p99 acquire
// latency (for waiters: hand-offs/s and p99 hand-off latency) of every peer
// side by side, to DIR/<workload>.svg. -charts FILE measures nothing
// and draws the charts of the medians in FILE (written by -json) into -out.
//
// -participants 1000,10000,50000 measures something else instead: the
// listing of a lock directory's participants, ours against Curator's
// LeaderSelector.getParticipants, on the same directories (participants.go).
//
// -cache 10000 measures our cache (package cache) against Curator's
// CuratorCache instead: initial load, heap per node, and event latency
// under -cache-rate writes/s for -cache-time (cache.go).
//
// It uses ZK_SERVERS (or -servers, host:port without chroot) if set, else
// starts a local ZooKeeper through zktest. A peer whose runtime or library is
// missing is reported and skipped.
//
// Usage:
//
//	go run ./cmd/zkbench [-peers zk,ours,curator,kazoo,etcd,pg,redis,k8s] [-rounds 3] [-duration 2s]
//	    [-clients 8,32] [-waiters 2,10,100,1000] [-handoffs 200] [-latency 0] [-json out.jsonl] [-out DIR]
//	go run ./cmd/zkbench -charts out.jsonl -out DIR
//	go run ./cmd/zkbench -participants 1000,10000,50000 [-rounds 3]
//	go run ./cmd/zkbench -cache 10000 [-cache-rate 500] [-cache-time 10s] [-rounds 3] [-json out.jsonl]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
)

// peer runs workloads for one lock implementation.
type peer interface {
	Name() string
	Run(ctx context.Context, s Spec) Result
	// Waiters reports whether the peer runs the waiters workloads.
	Waiters() bool
	Close() error
}

type options struct {
	servers  string
	peers    []string
	rounds   int
	duration time.Duration
	warmup   time.Duration
	clients  []int
	waiters  []int
	handoffs int
	modes    []string
	jsonOut  string
	outDir   string
	python   string
	spread   string
	latency  time.Duration
	// participants: directory sizes for -participants (none: the lock
	// workloads)
	participants []int
	cache        cacheOptions // -cache (cache.go)
}

func main() {
	if spec, ok := os.LookupEnv(proxyEnv); ok {
		os.Exit(runProxy(spec))
	}
	var o options
	var peers, clients, waiters, modes string
	flag.StringVar(&o.servers, "servers", os.Getenv("ZK_SERVERS"), "ZooKeeper host:port,... without chroot (default $ZK_SERVERS; empty: start a local server)")
	flag.StringVar(&peers, "peers", "zk,ours,curator,kazoo", "peers to measure, in round-1 order: zk, ours, curator, kazoo; etcd, pg, redis, k8s (the other backends)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (peer order rotated by one per round); the table shows medians")
	flag.DurationVar(&o.duration, "duration", 2*time.Second, "measured time of each uncontended and contended run; × 10: the wall-time cap of each waiters run")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up time per peer before the rounds (not recorded)")
	flag.StringVar(&clients, "clients", "8,32", "client counts of the contended workloads (empty: none)")
	flag.StringVar(&waiters, "waiters", "2,10,100,1000", "waiter counts of the waiters workloads (empty: none)")
	flag.IntVar(&o.handoffs, "handoffs", 200, "hand-offs to measure per waiters workload and round: ceil(handoffs / W) cycles on the same sessions, at least one, fewer if -duration × 10 of wall time passes first")
	flag.StringVar(&modes, "waiter-sessions", "sep,one", "waiters on separate sessions (sep) and/or all on one session (one)")
	flag.StringVar(&o.jsonOut, "json", "", "write JSON lines (every round and the medians) to this file; - for stdout (the table then goes to stderr)")
	flag.StringVar(&o.outDir, "out", "", "write the JSON lines (DIR/zkbench.jsonl, unless -json is given) and a chart per workload (DIR/<workload>.svg) to this directory")
	participants := flag.String("participants", "", "measure only the listing of participants (ours against Curator's LeaderSelector.getParticipants) of directories of these sizes, e.g. 1000,10000,50000")
	charts := flag.String("charts", "", "measure nothing: draw the charts of the medians in this JSON lines file into -out")
	registerCacheFlags(&o.cache)
	flag.StringVar(&o.python, "python", defaultPython(), "Python interpreter with kazoo, for the kazoo peer")
	flag.StringVar(&o.spread, "spread", "auto", "spread client source addresses over 127.0.1.x (to stay under maxClientCnxns per address): auto (when the server is on loopback), true, false")
	flag.DurationVar(&o.latency, "latency", 0, "added latency in each direction between every ZooKeeper peer's clients and the server (a proxy in a process of its own); 0: direct. The etcd, pg, redis, k8s peers always connect directly")
	flag.Parse()
	o.peers = splitList(peers)
	o.modes = splitList(modes)
	var err error
	if o.clients, err = parseInts(clients); err == nil {
		o.waiters, err = parseInts(waiters)
	}
	if err == nil {
		o.participants, err = parseInts(*participants)
	}
	if err == nil {
		err = o.cache.check()
	}
	if err == nil && *charts != "" && o.outDir == "" {
		err = errors.New("-charts needs -out, the directory to draw into")
	}
	if err == nil && *charts == "" {
		err = o.check()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zkbench: bad flags:", err)
		os.Exit(2)
	}
	if *charts != "" {
		if err := drawCharts(*charts, o.outDir); err != nil {
			fmt.Fprintln(os.Stderr, "zkbench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runFn := run
	if len(o.participants) > 0 {
		runFn = runParticipants
	}
	if o.cache.nodes > 0 {
		runFn = runCache
	}
	if err := runFn(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "zkbench:", err)
		stop()
		os.Exit(1)
	}
}

// knownPeers are the peers zkbench can measure.
var knownPeers = []string{"zk", "ours", "curator", "kazoo", "etcd", "pg", "redis", "k8s"}

// maxLatency bounds -latency: every client asks for a 10 s session, and a
// round trip of more than 2 s leaves it no time to ping.
const maxLatency = time.Second

// check refuses flags that would measure nothing or something else than
// asked, before any server is started.
func (o options) check() error {
	switch {
	case o.rounds < 1:
		return fmt.Errorf("-rounds %d: at least 1", o.rounds)
	case len(o.peers) == 0:
		return fmt.Errorf("-peers is empty: name one or more of %s", strings.Join(knownPeers, ", "))
	case o.duration <= 0:
		return fmt.Errorf("-duration %v: must be positive", o.duration)
	case o.warmup < 0:
		return fmt.Errorf("-warmup %v is negative", o.warmup)
	case o.handoffs < 0:
		return fmt.Errorf("-handoffs %d is negative", o.handoffs)
	case o.latency < 0:
		return fmt.Errorf("-latency %v is negative", o.latency)
	case o.latency > maxLatency:
		return fmt.Errorf("-latency %v: at most %v (every client's session is %v)", o.latency, maxLatency, sessionTimeout)
	case len(o.waiters) > 0 && len(o.modes) == 0:
		return errors.New("-waiter-sessions is empty: sep, one, or both")
	case o.spread != "auto" && o.spread != "true" && o.spread != "false":
		return fmt.Errorf("-spread %q: auto, true or false", o.spread)
	}
	for _, list := range []struct {
		flag  string
		items []string
		known []string
	}{{"-peers", o.peers, knownPeers}, {"-waiter-sessions", o.modes, []string{"sep", "one"}}} {
		for i, it := range list.items {
			if !slices.Contains(list.known, it) {
				return fmt.Errorf("%s: unknown %q (want %s)", list.flag, it, strings.Join(list.known, ", "))
			}
			if slices.Contains(list.items[:i], it) {
				return fmt.Errorf("%s: %q twice", list.flag, it)
			}
		}
	}
	for _, list := range []struct {
		flag  string
		items []int
	}{{"-clients", o.clients}, {"-waiters", o.waiters}} {
		for i, n := range list.items {
			if slices.Contains(list.items[:i], n) {
				return fmt.Errorf("%s: %d twice", list.flag, n)
			}
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// defaultPython prefers Debian's interpreter, where python3-kazoo installs.
func defaultPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// specs lists the workloads in run order.
func (o options) specs() []Spec {
	out := []Spec{{Kind: "loop", Clients: 1, Duration: o.duration}}
	for _, c := range o.clients {
		out = append(out, Spec{Kind: "loop", Clients: c, Duration: o.duration})
	}
	for _, w := range o.waiters {
		for _, m := range o.modes {
			out = append(out, Spec{Kind: "waiters", Waiters: w, Shared: m == "one",
				Cycles: cyclesFor(o.handoffs, w), Duration: 10 * o.duration})
		}
	}
	return out
}

// drawCharts draws the charts of the medians in file into dir.
func drawCharts(file, dir string) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	meds, rounds, err := readMedians(in)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	files, err := writeCharts(dir, meds, rounds)
	for _, f := range files {
		fmt.Println(f)
	}
	return err
}

// run measures o's workloads on every peer, rounds after a warm-up, and
// prints the medians (and writes the JSON lines and charts asked for).
func run(ctx context.Context, o options) error {
	table, jsonW, closeOut, err := openOutputs(&o)
	if err != nil {
		return err
	}
	defer closeOut()
	b := &bench{o: o}
	defer b.close()
	if err := b.setUp(ctx); err != nil {
		return err
	}
	emit := func(r Result) {
		if jsonW != nil {
			line, _ := json.Marshal(r)
			fmt.Fprintf(jsonW, "%s\n", line)
		}
	}
	b.warmUp(ctx)
	meds, err := b.measure(ctx, emit)
	if err != nil {
		return err
	}
	printTable(table, meds, o, b.peers)
	if o.outDir != "" {
		files, err := writeCharts(o.outDir, meds, o.rounds)
		if err != nil {
			return err
		}
		logf("%d charts in %s, the JSON lines in %s", len(files), o.outDir, o.jsonOut)
	}
	return nil
}

// openOutputs opens where the table and the JSON lines go (-json, -out):
// the table to stdout (stderr with -json -), the JSON lines nowhere, to a
// file, or to stdout. close closes what it opened.
func openOutputs(o *options) (table, jsonW io.Writer, close func(), err error) {
	table, close = os.Stdout, func() {}
	if o.outDir != "" {
		if err := os.MkdirAll(o.outDir, 0o755); err != nil {
			return nil, nil, nil, err
		}
		if o.jsonOut == "" {
			o.jsonOut = filepath.Join(o.outDir, "zkbench.jsonl")
		}
	}
	switch o.jsonOut {
	case "":
	case "-":
		table, jsonW = os.Stderr, os.Stdout
	default:
		f, err := os.Create(o.jsonOut)
		if err != nil {
			return nil, nil, nil, err
		}
		jsonW, close = f, func() { f.Close() }
	}
	return table, jsonW, close, nil
}

// logf writes one progress line to stderr.
func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "zkbench: "+format+"\n", args...) }

// cpuCell formats a CPU µs/acq figure; 0 is not measured.
func cpuCell(us float64) string {
	if us <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", us)
}

// cyclesNote tells, in the log, how many cycles a waiters run made.
func cyclesNote(r Result, s Spec) string {
	if s.Kind != "waiters" {
		return ""
	}
	note := fmt.Sprintf("  %d/%d cycles", r.Cycles, s.Cycles)
	if r.Capped {
		note += fmt.Sprintf(" (stopped at the wall-time cap, %v)", s.Duration)
	}
	return note
}

// cyclesCell formats a result's cycles for the table: - for loop
// workloads, a * when the wall-time cap stopped them.
func cyclesCell(r Result) string {
	if !strings.HasPrefix(r.Workload, "waiters") {
		return "-"
	}
	if r.Capped {
		return fmt.Sprintf("%d*", r.Cycles)
	}
	return fmt.Sprint(r.Cycles)
}

// linkLine says how the rows' clients reached their servers.
func linkLine(latency time.Duration, peers []peer) string {
	backends := false
	for _, p := range peers {
		backends = backends || isBackendPeer(p.Name())
	}
	if latency <= 0 {
		return "link: direct, loopback (-latency 0)"
	}
	s := fmt.Sprintf("link: ZooKeeper peers through a proxy adding %v each way (-latency %v)", latency, latency)
	if backends {
		s += "; etcd, pg, redis, k8s rows: direct, loopback"
	}
	return s
}

// loopback reports whether every address is on the loopback interface.
func loopback(addrs []string) bool {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return false
		}
		if host == "localhost" {
			continue
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() || ip.To4() == nil {
			return false
		}
	}
	return true
}

// deleteAll deletes p and everything under it.
func deleteAll(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := deleteAll(c, path.Join(p, ch)); err != nil {
			return err
		}
	}
	if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// printTable writes the medians, then ours against the best other peer.
func printTable(w io.Writer, meds []Result, o options, peers []peer) {
	fmt.Fprintf(w, "\nmedians of %d round(s); peer order rotated per round\n", o.rounds)
	fmt.Fprintln(w, linkLine(o.latency, peers))
	fmt.Fprintln(w, "cli/srv µs/acq: CPU time per acquisition of the clients' process and of the server, - when not measured")
	fmt.Fprintf(w, "cycles (waiters): hand-offs = W × cycles, ceil(%d / W) asked; * stopped at the wall-time cap (-duration × 10)\n", o.handoffs)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tpeer\tacq/s\tp50 ms\tp99 ms\tpkts/acq\theap B/waiter\tcli µs/acq\tsrv µs/acq\tcycles\t")
	last := ""
	for _, m := range meds {
		wl := m.Workload
		if wl == last {
			wl = ""
		}
		last = m.Workload
		heap, pkts := "-", "-"
		if strings.HasPrefix(m.Workload, "waiters") {
			heap = fmt.Sprintf("%.0f", m.HeapPerWaiter)
		}
		if m.PacketsPerAcq >= 0 {
			pkts = fmt.Sprintf("%.1f", m.PacketsPerAcq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n", wl, m.Peer, m.AcqPerS, m.P50us/1000, m.P99us/1000, pkts, heap,
			cpuCell(m.ClientCPUus), cpuCell(m.ServerCPUus), cyclesCell(m))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nours vs the best other ZooKeeper peer (acq/s ratio; p99)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tours/zk\tbest peer\tours/best\tours p99 ms\tbest p99 ms\t")
	byWL := map[string]map[string]Result{}
	var order []string
	for _, m := range meds {
		if byWL[m.Workload] == nil {
			byWL[m.Workload] = map[string]Result{}
			order = append(order, m.Workload)
		}
		byWL[m.Workload][m.Peer] = m
	}
	for _, wl := range order {
		ours, ok := byWL[wl]["ours"]
		if !ok {
			continue
		}
		var best Result
		for _, p := range peers {
			if r, ok := byWL[wl][p.Name()]; ok && p.Name() != "ours" && !isBackendPeer(p.Name()) && r.AcqPerS > best.AcqPerS {
				best = r
			}
		}
		if best.Peer == "" {
			continue
		}
		vsZK := "-"
		if zkR, ok := byWL[wl]["zk"]; ok && zkR.AcqPerS > 0 {
			vsZK = fmt.Sprintf("%.2f×", ours.AcqPerS/zkR.AcqPerS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f×\t%.2f\t%.2f\t\n", wl, vsZK, best.Peer, ours.AcqPerS/best.AcqPerS, ours.P99us/1000, best.P99us/1000)
	}
	tw.Flush()
}
