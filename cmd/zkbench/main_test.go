package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// TestMain runs the tests, or, when startProxy runs this binary as
// zkbench's latency proxy, that proxy.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(proxyEnv); ok {
		os.Exit(runProxy(spec))
	}
	zktest.MainThen(m, k8stest.StopShared) // klog's flush goroutine, which client-go starts
}

// TestGoPeers runs every workload kind, briefly, for both in-process peers
// against a real server, with spread source addresses: each must measure
// something (packets, this process's CPU), with no overlapping holders and
// no error; a waiters workload runs its cycles on the same sessions (W
// hand-offs each), or one only when its wall-time cap has passed.
func TestGoPeers(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	specs := []Spec{
		{Kind: "loop", Clients: 1, Duration: 100 * time.Millisecond},
		{Kind: "loop", Clients: 3, Duration: 100 * time.Millisecond},
		{Kind: "waiters", Waiters: 3, Cycles: 3, Duration: time.Minute},
		{Kind: "waiters", Waiters: 3, Shared: true, Cycles: 3},
		{Kind: "waiters", Waiters: 2, Cycles: 5, Duration: time.Nanosecond}, // capped
	}
	m := meter{mntr: cl.Addrs()[0], clientPID: os.Getpid()}
	for _, p := range []*goPeer{oursPeer(cl.Addrs(), true, m), zkPeer(cl.Addrs(), true, m)} {
		for _, s := range specs {
			s.Path = cl.Chroot() + "/bench/" + p.Name() + "/" + s.Name()
			r := p.Run(ctx, s)
			switch {
			case r.Error != "":
				t.Errorf("%s %s: %s", p.Name(), s.Name(), r.Error)
			case r.Ops == 0 || r.AcqPerS <= 0 || r.P50us <= 0 || r.P99us < r.P50us || r.Packets <= 0 || r.ClientCPUus <= 0 || r.ServerCPUus != 0:
				t.Errorf("%s %s: implausible result %+v", p.Name(), s.Name(), r)
			case r.Overlaps != 0:
				t.Errorf("%s %s: %d overlapping holders", p.Name(), s.Name(), r.Overlaps)
			case s.Kind == "waiters" && s.Duration == time.Nanosecond && (r.Cycles != 1 || !r.Capped || r.Ops != s.Waiters):
				t.Errorf("%s %s capped: %d cycles, capped %t, %d hand-offs (want 1, true, %d)", p.Name(), s.Name(), r.Cycles, r.Capped, r.Ops, s.Waiters)
			case s.Kind == "waiters" && s.Duration != time.Nanosecond && (r.Cycles != s.Cycles || r.Capped || r.Ops != s.Waiters*s.Cycles || r.HeapPerWaiter == -1):
				t.Errorf("%s %s: %d cycles, capped %t, %d hand-offs (want %d, false, %d), heap/waiter %v", p.Name(), s.Name(),
					r.Cycles, r.Capped, r.Ops, s.Cycles, s.Waiters*s.Cycles, r.HeapPerWaiter)
			}
		}
	}
}

// TestBackendPeers runs the loop workloads, briefly, for the other
// backends' peers, each on a server of its own started as zkbench starts
// it: each must measure something, with no overlapping holders, no error
// and no packet count; none runs the waiters workloads.
func TestBackendPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range []string{"etcd", "pg", "redis", "k8s"} {
		p, stop, err := startBackendPeer(ctx, name, "/zkbench-test")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Waiters() {
			t.Errorf("%s: runs the waiters workloads", name)
		}
		for _, s := range []Spec{
			{Kind: "loop", Clients: 1, Duration: 200 * time.Millisecond},
			{Kind: "loop", Clients: 3, Duration: 200 * time.Millisecond},
		} {
			s.Path = "/bench/" + name + "/" + s.Name()
			r := p.Run(ctx, s)
			switch {
			case r.Error != "":
				t.Errorf("%s %s: %s", name, s.Name(), r.Error)
			case r.Ops == 0 || r.AcqPerS <= 0 || r.P50us <= 0 || r.P99us < r.P50us || r.Packets != -1 || r.PacketsPerAcq != -1 ||
				r.ClientCPUus <= 0 || r.ServerCPUus != 0:
				t.Errorf("%s %s: implausible result %+v", name, s.Name(), r)
			case r.Overlaps != 0:
				t.Errorf("%s %s: %d overlapping holders", name, s.Name(), r.Overlaps)
			}
		}
		stop()
	}
}

// TestStats checks the percentile, median and naming helpers.
func TestStats(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	if p50, p99 := percentile(d, 0.5), percentile(d, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("p50, p99 = %v, %v; want 50, 99", p50, p99)
	}
	m := median([]Result{{AcqPerS: 3, Overlaps: 1}, {AcqPerS: 1}, {AcqPerS: 2}})
	if m.AcqPerS != 2 || m.Overlaps != 1 || m.Type != "median" {
		t.Errorf("median = %+v", m)
	}
	names := map[string]Spec{
		"uncontended":      {Kind: "loop", Clients: 1},
		"contended-8":      {Kind: "loop", Clients: 8},
		"waiters-10-sep":   {Kind: "waiters", Waiters: 10},
		"waiters-1000-one": {Kind: "waiters", Waiters: 1000, Shared: true},
	}
	for want, s := range names {
		if s.Name() != want {
			t.Errorf("Name() = %q, want %q", s.Name(), want)
		}
	}
	m = median([]Result{{Cycles: 5}, {Cycles: 3, Capped: true}, {Cycles: 5}})
	if m.Cycles != 5 || !m.Capped {
		t.Errorf("median of cycles = %d, capped %t; want 5, true", m.Cycles, m.Capped)
	}
	if got, err := parseInts("2, 10,1000"); err != nil || len(got) != 3 || got[2] != 1000 {
		t.Errorf("parseInts = %v, %v", got, err)
	}
	if !loopback([]string{"127.0.0.1:2181", "localhost:1"}) || loopback([]string{"10.0.0.1:2181"}) {
		t.Error("loopback")
	}
}

// TestCharts: a chart per workload, each with every peer's acquisitions/s
// and p99 (hand-offs for a waiters workload), ours highlighted; drawn again
// from the JSON lines -json writes.
func TestCharts(t *testing.T) {
	meds := []Result{
		{Type: "median", Peer: "zk", Workload: "uncontended", AcqPerS: 1345, P99us: 2450},
		{Type: "median", Peer: "ours", Workload: "uncontended", AcqPerS: 1333, P99us: 2140},
		{Type: "median", Peer: "zk", Workload: "contended-8", AcqPerS: 1135, P99us: 16590},
		{Type: "median", Peer: "ours", Workload: "contended-8", AcqPerS: 995, P99us: 17410},
		{Type: "median", Peer: "ours", Workload: "waiters-10-sep", AcqPerS: 714, P99us: 2440},
	}
	var lines strings.Builder
	for _, r := range append([]Result{{Type: "run", Peer: "zk", Workload: "uncontended", Round: 3}}, meds...) {
		b, _ := json.Marshal(r)
		fmt.Fprintf(&lines, "%s\n", b)
	}
	back, rounds, err := readMedians(strings.NewReader(lines.String()))
	if err != nil || len(back) != len(meds) || rounds != 3 || back[1].AcqPerS != 1333 {
		t.Fatalf("read back %+v, %d rounds, %v", back, rounds, err)
	}
	dir := t.TempDir()
	files, err := writeCharts(dir, back, rounds)
	if err != nil || len(files) != 3 || filepath.Base(files[0]) != "uncontended.svg" {
		t.Fatalf("charts %q, %v", files, err)
	}
	b, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{"<svg", ">contended-8</text>", ">zk</text>", ">ours</text>", ">1135</text>", ">995</text>",
		">16.59</text>", ">17.41</text>", `fill="` + oursFil + `"`, "medians of 3 round(s)",
		">acquisitions/s (more is better)</text>", ">p99 acquire latency, ms (less is better)</text>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %s", want)
		}
	}
	// a waiters workload measures hand-offs (docs/performance.md)
	w, err := os.ReadFile(files[2])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">hand-offs/s (more is better)</text>", ">p99 hand-off latency, ms (less is better)</text>"} {
		if !strings.Contains(string(w), want) {
			t.Errorf("the waiters chart lacks %s", want)
		}
	}
	if err := xml.Unmarshal(b, new(struct{ XMLName xml.Name })); err != nil {
		t.Errorf("the chart is not well-formed XML: %v", err)
	}
}

// TestReadMediansRefusesBadInput: a file that is not zkbench's JSON lines
// gets an error that says which line and why.
func TestReadMediansRefusesBadInput(t *testing.T) {
	good := `{"type":"median","peer":"zk","workload":"uncontended","acq_per_s":1}`
	for in, want := range map[string]string{
		"":                              "no median lines",
		`{"type":"run","round":1}`:      "no median lines",
		good[:30]:                       "line 1: not a zkbench result",
		good + "\n" + `{"type":"mean"}`: `line 2: type "mean"`,
		`{"type":"median","peer":"zk"}`: "without peer or workload",
		`{"type":"median","flavour":1}`: `unknown field "flavour"`,
	} {
		if _, _, err := readMedians(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error mentioning %q", in, err, want)
		}
	}
}

// TestLatencyProxy: through the proxy process that -latency starts (this
// test binary again, see TestMain), with spread source addresses, a zk.Lock
// acquisition takes at least the added round trips (create, then
// getChildren: 2 × 2 × 5 ms), and the server is measured through its own
// address; stop ends the proxy.
func TestLatencyProxy(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxied, stop, err := startProxy(ctx, cl.Addrs(), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if proxied[0] == cl.Addrs()[0] {
		t.Fatalf("proxied address %s is the server's", proxied[0])
	}
	p := zkPeer(proxied, true, meter{mntr: cl.Addrs()[0], clientPID: os.Getpid()})
	s := Spec{Kind: "loop", Clients: 2, Duration: 300 * time.Millisecond, Path: cl.Chroot() + "/bench/latency"}
	r := p.Run(ctx, s)
	if r.Error != "" || r.Ops == 0 || r.Packets <= 0 {
		t.Fatalf("through the proxy: %+v", r)
	}
	if r.P50us < 20000 {
		t.Errorf("p50 %.0f µs through a proxy adding 5 ms each way: want at least 20 ms", r.P50us)
	}
}

// TestProcessCPU: a process's CPU time grows while it computes, and an
// unknown process gives an error (cpuOf: -1).
func TestProcessCPU(t *testing.T) {
	a, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	b, err := processCPU(os.Getpid())
	if err != nil || b <= a {
		t.Errorf("CPU time %v then %v (%v) around a busy loop (%d)", a, b, err, x)
	}
	if cpuOf(0) != -1 || cpuOf(1<<22) != -1 { // pid_max is at most 2^22
		t.Error("cpuOf of no process is not -1")
	}
}

// TestPhaseAndTable: the phase's figures per acquisition, - for what was
// not measured, and the table's CPU columns and link line.
func TestPhaseAndTable(t *testing.T) {
	start := phase{packets: 100, cli: time.Second, srv: -1}
	d := start.to(phase{packets: 160, cli: time.Second + 20*time.Millisecond, srv: 5 * time.Second})
	if d != (phase{packets: 60, cli: 20 * time.Millisecond, srv: -1}) {
		t.Fatalf("to = %+v", d)
	}
	if sum := d.add(phase{packets: 40, cli: time.Millisecond, srv: 3}); sum != (phase{packets: 100, cli: 21 * time.Millisecond, srv: -1}) {
		t.Errorf("add = %+v", sum)
	}
	r := Result{Ops: 10}
	r.setPhase(d)
	if r.Packets != 60 || r.PacketsPerAcq != 6 || r.ClientCPUus != 2000 || r.ServerCPUus != 0 {
		t.Errorf("setPhase = %+v", r)
	}
	r.setPhase(phase{packets: -1, cli: -1, srv: -1})
	if r.Packets != -1 || r.PacketsPerAcq != -1 || r.ClientCPUus != 0 {
		t.Errorf("setPhase of nothing measured = %+v", r)
	}
	if b, _ := json.Marshal(Result{LatencyMs: 1}); strings.Contains(string(b), "cpu") || !strings.Contains(string(b), `"latency_ms":1`) {
		t.Errorf("JSON %s: want no CPU fields when not measured, and the latency", b)
	}

	meds := []Result{
		{Peer: "zk", Workload: "uncontended", AcqPerS: 1000, P50us: 500, P99us: 900, PacketsPerAcq: 6, ClientCPUus: 123.4, ServerCPUus: 456.6, LatencyMs: 1},
		{Peer: "ours", Workload: "uncontended", AcqPerS: 1100, P50us: 400, P99us: 800, PacketsPerAcq: 7, ClientCPUus: 150, LatencyMs: 1},
		{Peer: "etcd", Workload: "uncontended", AcqPerS: 300, P50us: 1500, P99us: 7000, PacketsPerAcq: -1, ClientCPUus: 80},
		{Peer: "zk", Workload: "waiters-2-one", AcqPerS: 700, PacketsPerAcq: 4, Cycles: 100},
		{Peer: "ours", Workload: "waiters-2-one", AcqPerS: 600, PacketsPerAcq: 4, Cycles: 37, Capped: true},
	}
	peers := []peer{&goPeer{name: "zk"}, &goPeer{name: "ours"}, &goPeer{name: "etcd"}}
	var out strings.Builder
	printTable(&out, meds, options{rounds: 1, latency: time.Millisecond, handoffs: 200}, peers)
	for _, want := range []string{
		"link: ZooKeeper peers through a proxy adding 1ms each way (-latency 1ms); etcd, pg, redis, k8s rows: direct, loopback",
		"cli µs/acq  srv µs/acq", "6.0              -         123         457", "7.0              -         150           -",
		"-              -          80           -       -", "-     100", "-     37*",
		"cycles (waiters): hand-offs = W × cycles, ceil(200 / W) asked; * stopped at the wall-time cap (-duration × 10)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if l := linkLine(0, peers); l != "link: direct, loopback (-latency 0)" {
		t.Errorf("linkLine(0) = %q", l)
	}
}

// TestWaitersSpecs: the waiters workloads ask for ceil(handoffs / W)
// cycles, at least one, capped at -duration × 10 of wall time, and the
// request line carries both to the peer drivers (which parse key=value
// fields split on blanks).
func TestWaitersSpecs(t *testing.T) {
	for _, c := range []struct{ handoffs, w, want int }{
		{200, 2, 100}, {200, 3, 67}, {200, 100, 2}, {200, 1000, 1}, {0, 10, 1}, {1, 1, 1}, {5, 0, 1},
	} {
		if got := cyclesFor(c.handoffs, c.w); got != c.want {
			t.Errorf("cyclesFor(%d, %d) = %d, want %d", c.handoffs, c.w, got, c.want)
		}
	}
	o := options{duration: 2 * time.Second, waiters: []int{2, 1000}, modes: []string{"sep", "one"}, handoffs: 200}
	var ws []Spec
	for _, s := range o.specs() {
		if s.Kind == "waiters" {
			ws = append(ws, s)
		}
	}
	if len(ws) != 4 || ws[0].Cycles != 100 || ws[1].Cycles != 100 || !ws[1].Shared || ws[3].Cycles != 1 || ws[0].Duration != 20*time.Second {
		t.Fatalf("waiters specs = %+v", ws)
	}
	ws[0].Path = "/zkbench/1/ours/waiters-2-sep-r1"
	fields := map[string]string{}
	f := strings.Fields(ws[0].line())
	if f[0] != "run" {
		t.Fatalf("line %q does not start with run", ws[0].line())
	}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("line %q: field %q is not key=value", ws[0].line(), kv)
		}
		fields[k] = v
	}
	want := map[string]string{"kind": "waiters", "clients": "0", "waiters": "2", "shared": "false",
		"duration_ms": "20000", "cycles": "100", "path": "/zkbench/1/ours/waiters-2-sep-r1"}
	if fmt.Sprint(fields) != fmt.Sprint(want) {
		t.Errorf("line %q: fields %v, want %v", ws[0].line(), fields, want)
	}
}

// TestMeterCalibrate: an mntr exchange counts packets on the server; once
// calibrated, a phase with nothing in it measures (about) none: less than
// one exchange (an idle session's ping may still fall in).
func TestMeterCalibrate(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := meter{mntr: cl.Addrs()[0]}
	if err := m.calibrate(ctx); err != nil {
		t.Fatal(err)
	}
	if m.mntrPackets <= 0 {
		t.Fatalf("one mntr exchange counts %d packets; want some", m.mntrPackets)
	}
	start, err := m.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.end(ctx, start)
	if err != nil || d.packets < 0 || d.packets >= m.mntrPackets {
		t.Errorf("an empty phase: %d packets (%v); want fewer than one exchange's %d", d.packets, err, m.mntrPackets)
	}
}

// TestCheckFlags: flags that would measure nothing, or something else than
// asked, are refused before any server starts, each with its own message.
func TestCheckFlags(t *testing.T) {
	good := options{rounds: 3, peers: []string{"zk", "ours"}, duration: 2 * time.Second, warmup: time.Second,
		clients: []int{8, 32}, waiters: []int{2, 10}, modes: []string{"sep", "one"}, spread: "auto", latency: time.Millisecond}
	if err := good.check(); err != nil {
		t.Fatalf("good flags refused: %v", err)
	}
	for _, c := range []struct {
		change func(*options)
		want   string
	}{
		{func(o *options) { o.rounds = 0 }, "-rounds 0"},
		{func(o *options) { o.peers = nil }, "-peers is empty"},
		{func(o *options) { o.peers = []string{"zk", "bogus"} }, `unknown "bogus"`},
		{func(o *options) { o.peers = []string{"zk", "zk"} }, `"zk" twice`},
		{func(o *options) { o.duration = 0 }, "-duration 0s"},
		{func(o *options) { o.duration = -time.Second }, "-duration -1s"},
		{func(o *options) { o.warmup = -time.Second }, "-warmup -1s"},
		{func(o *options) { o.handoffs = -5 }, "-handoffs -5"},
		{func(o *options) { o.latency = -time.Millisecond }, "-latency -1ms"},
		{func(o *options) { o.latency = time.Hour }, "-latency 1h0m0s: at most"},
		{func(o *options) { o.modes = []string{"bogus"} }, `-waiter-sessions: unknown "bogus"`},
		{func(o *options) { o.modes = nil }, "-waiter-sessions is empty"},
		{func(o *options) { o.waiters = []int{2, 2} }, "-waiters: 2 twice"},
		{func(o *options) { o.clients = []int{8, 8} }, "-clients: 8 twice"},
		{func(o *options) { o.spread = "maybe" }, `-spread "maybe"`},
	} {
		o := good
		o.peers, o.modes = append([]string(nil), good.peers...), append([]string(nil), good.modes...)
		c.change(&o)
		err := o.check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	noWaiters := good
	noWaiters.waiters, noWaiters.modes = nil, nil
	if err := noWaiters.check(); err != nil {
		t.Errorf("no waiters workloads and no modes refused: %v", err)
	}
}

// TestParticipantsMode runs -participants on a small directory against a
// real server: ours (and Curator, when installed: else it is reported and
// left out, as for the lock workloads) lists every node, and the run
// leaves no node behind.
func TestParticipantsMode(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := options{servers: strings.Join(cl.Addrs(), ","), rounds: 1, participants: []int{700}}
	if err := runParticipants(ctx, o); err != nil {
		t.Fatal(err)
	}
	in := zktest.Inspect(t, cl)
	runs, _, err := in.Conn().Children("/zkbench")
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	for _, r := range runs {
		if ds, _, err := in.Conn().Children("/zkbench/" + r); err == nil && slices.Contains(ds, "participants-700") {
			t.Errorf("/zkbench/%s/participants-700 left behind", r)
		}
	}
}
