package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/cache"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// cacheDriverEnv, when set, makes this binary the driver of our cache
// (package cache) for zkbench -cache, instead of a benchmark: its value is
// the ZooKeeper servers, host:port,... The driver is a process of its own,
// as Curator's (peers/CacheBench.java) is, so that its heap holds the cache
// and its session only, and its CPU time is not the writer's. Checked in
// init, so that the test binary, which startCacheDrivers runs in tests,
// becomes the driver too. Not a user option.
const cacheDriverEnv = "ZKBENCH_CACHE_DRIVER"

func init() {
	if servers, ok := os.LookupEnv(cacheDriverEnv); ok {
		os.Exit(runCacheDriver(servers))
	}
}

// runCacheDriver speaks the cache drivers' protocol (cache_peer.go) on
// stdin and stdout until stdin closes, and returns the process's exit
// code.
func runCacheDriver(servers string) int {
	d := &goCacheDriver{servers: splitList(servers), in: bufio.NewScanner(os.Stdin)}
	if err := d.connect(); err != nil {
		fmt.Fprintln(os.Stderr, "zkbench cache driver:", err)
		return 1
	}
	fmt.Println(`{"ready":true}`)
	for d.in.Scan() {
		f := strings.Fields(d.in.Text())
		if len(f) == 0 {
			continue
		}
		root := ""
		if len(f) > 1 {
			root = strings.TrimPrefix(f[1], "root=")
		}
		var reply any
		var err error
		switch f[0] {
		case "load":
			if d.s == nil {
				err = d.connect()
			}
			if err == nil {
				reply, err = d.load(root)
			}
		case "release":
			d.release()
			reply = map[string]bool{"released": true}
		case "watch":
			d.release()
			if err = d.connect(); err == nil {
				reply, err = d.watch(root)
				d.release()
			}
		default:
			err = fmt.Errorf("unknown command %q", f[0])
		}
		if err != nil {
			reply = map[string]string{"error": err.Error()}
		}
		b, _ := json.Marshal(reply)
		fmt.Printf("%s\n", b)
	}
	return 0
}

// goCacheDriver holds the session of the loads (d.s, from the start to
// "release"), then one session per watch, as the Java driver does.
type goCacheDriver struct {
	servers []string
	s       *zookeeper.Session // nil: none
	in      *bufio.Scanner
}

// release closes d.s, if any.
func (d *goCacheDriver) release() {
	if d.s != nil {
		d.s.Close()
		d.s = nil
	}
}

// connect sets d.s to a new session.
func (d *goCacheDriver) connect() (err error) {
	d.s, err = zookeeper.Connect(context.Background(), d.servers, zookeeper.WithSessionTimeout(sessionTimeout),
		zookeeper.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	return err
}

// open starts a cache of root, without limits (as Curator's has none), and
// waits until it is loaded; it returns the cache, its listener and the
// number of nodes it reported before CacheInitialized. stop ends the
// listener.
func (d *goCacheDriver) open(root string) (c *cache.Cache, ch <-chan recipe.CacheEvent, nodes int, stop func(), err error) {
	c, err = cache.New(d.s, root, cache.WithLimits(math.MaxInt32, math.MaxInt64))
	if err != nil {
		return nil, nil, 0, nil, err
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Minute)
	ch = c.Listen(ctx)
	for e := range ch {
		switch e.Kind {
		case recipe.NodeCreated:
			nodes++
		case recipe.CacheInitialized:
			return c, ch, nodes, stop, nil
		}
	}
	stop()
	c.Close()
	return nil, nil, 0, nil, fmt.Errorf("the cache stopped before it was loaded: %v", c.Err())
}

// load times one load of root, from cache.New to CacheInitialized, and
// measures the heap it holds then: HeapAlloc after runtime.GC with the
// cache loaded (and its listener attached), less before it.
func (d *goCacheDriver) load(root string) (cacheLoadReply, error) {
	h0, n0 := goHeap()
	start := time.Now()
	c, ch, nodes, stop, err := d.open(root)
	if err != nil {
		return cacheLoadReply{}, err
	}
	elapsed := time.Since(start)
	h1, n1 := goHeap()
	runtime.KeepAlive(ch)
	stop()
	c.Close()
	return cacheLoadReply{LoadMs: float64(elapsed) / float64(time.Millisecond), Nodes: nodes,
		HeapBytes: h1 - h0, HeapNoise: max(n0, n1)}, nil
}

// goHeap returns HeapAlloc after a full GC, and the spread of three such
// samples (the noise).
func goHeap() (heap, noise int64) {
	var ms runtime.MemStats
	lo, hi := int64(math.MaxInt64), int64(0)
	for range 3 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap = int64(ms.HeapAlloc)
		lo, hi = min(lo, heap), max(hi, heap)
	}
	return heap, hi - lo
}

// watchLog is what a watch records of the write phase's change events.
type watchLog struct {
	mu     sync.Mutex
	events int
	lat    []int64          // µs, receive − send, at a write's first sighting
	seen   map[int64]bool   // the writes (seq) seen
	final  map[string]int64 // node (below the root) → the last write seen
	want   int64            // the final write's seq; 0 until known
	done   chan struct{}    // closed once want is seen
}

// note records one event at time now (Unix ns).
func (w *watchLog) note(root string, e recipe.CacheEvent, now int64) {
	if e.Kind != recipe.NodeChanged {
		return
	}
	seq, sent, ok := parseStamp(e.Node.Data)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if !w.seen[seq] {
		w.seen[seq] = true
		w.lat = append(w.lat, (now-sent)/1000)
		if seq == w.want {
			close(w.done)
		}
	}
	w.final[strings.TrimPrefix(e.Node.Path, root+"/")] = seq
}

// parseStamp parses a write's data, "seq sendUnixNs padding"; ok is false
// for data no measured write made (seq 0: a warm-up write).
func parseStamp(data []byte) (seq, sent int64, ok bool) {
	f := bytes.Fields(data)
	if len(f) < 2 {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseInt(string(f[0]), 10, 64)
	sent, err2 := strconv.ParseInt(string(f[1]), 10, 64)
	return seq, sent, err1 == nil && err2 == nil && seq > 0
}

// watch loads a cache of root, marks the start of the write phase, records
// every change event until zkbench's "end seq=K" line and the sighting of
// write K (the last), marks the end and returns what it recorded.
func (d *goCacheDriver) watch(root string) (cacheWatchReply, error) {
	c, ch, _, stop, err := d.open(root)
	if err != nil {
		return cacheWatchReply{}, err
	}
	defer c.Close()
	w := &watchLog{seen: map[int64]bool{}, final: map[string]int64{}, done: make(chan struct{})}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for e := range ch {
			w.note(root, e, time.Now().UnixNano())
		}
	}()
	if err := d.mark("start"); err != nil {
		stop()
		return cacheWatchReply{}, err
	}
	want, err := d.endLine()
	if err == nil {
		w.mu.Lock()
		w.want = want
		if want <= 0 || w.seen[want] {
			close(w.done)
		}
		w.mu.Unlock()
		select {
		case <-w.done:
		case <-time.After(time.Minute):
			err = fmt.Errorf("write %d not seen a minute after it was made", want)
		}
	}
	stop()
	<-exited
	if err != nil {
		return cacheWatchReply{}, err
	}
	if err := d.mark("end"); err != nil {
		return cacheWatchReply{}, err
	}
	return cacheWatchReply{Events: w.events, Seen: len(w.seen), LatUs: w.lat, Final: w.final}, nil
}

// mark writes {"mark":name} and waits for zkbench's line.
func (d *goCacheDriver) mark(name string) error {
	fmt.Printf("{\"mark\":%q}\n", name)
	if !d.in.Scan() {
		return errors.New("stdin closed at a mark")
	}
	return nil
}

// endLine reads "end seq=K" and returns K.
func (d *goCacheDriver) endLine() (int64, error) {
	if !d.in.Scan() {
		return 0, errors.New("stdin closed before the end line")
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(d.in.Text()), "end seq=")
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("bad end line %q", d.in.Text())
	}
	return n, nil
}
