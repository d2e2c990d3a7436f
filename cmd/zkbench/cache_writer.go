package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// cacheTree is the tree the caches hold: under root, dirs directories of
// up to cacheFanout leaves each, n leaves in all, every node's data
// cacheDataSize bytes.
type cacheTree struct {
	root   string
	dirs   int
	leaves []string // below root: "d000/c000", ...
}

// held is the number of nodes a cache of the tree holds: the root, the
// directories and the leaves.
func (t cacheTree) held() int { return 1 + t.dirs + len(t.leaves) }

// populate creates the tree of n leaves under root (and root's parents),
// in multis of 500 creates, on conn.
func populate(conn *zk.Conn, root string, n int) (cacheTree, error) {
	t := cacheTree{root: root, dirs: (n + cacheFanout - 1) / cacheFanout}
	acl := zk.WorldACL(zk.PermAll)
	for i := 1; i <= len(root); i++ {
		if i < len(root) && root[i] != '/' {
			continue
		}
		if _, err := conn.Create(root[:i], nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return t, err
		}
	}
	width := len(strconv.Itoa(max(t.dirs, cacheFanout) - 1))
	var paths []string
	for d := range t.dirs {
		paths = append(paths, fmt.Sprintf("d%0*d", width, d))
	}
	for i := range n {
		t.leaves = append(t.leaves, fmt.Sprintf("d%0*d/c%0*d", width, i/cacheFanout, width, i%cacheFanout))
	}
	paths = append(paths, t.leaves...) // directories first
	data := bytes.Repeat([]byte{'.'}, cacheDataSize)
	for len(paths) > 0 {
		ops := make([]any, min(500, len(paths)))
		for i := range ops {
			ops[i] = &zk.CreateRequest{Path: root + "/" + paths[i], Data: data, Acl: acl}
		}
		if _, err := conn.Multi(ops...); err != nil {
			return t, err
		}
		paths = paths[len(ops):]
	}
	return t, nil
}

// writerLanes is the number of writes the writer keeps in flight: each
// lane a goroutine doing synchronous sets, each leaf always written by the
// same lane, so that a leaf's writes reach the server in the order made.
const writerLanes = 4

// cacheWriter sets random leaves of the tree at a steady rate, on a
// session of its own.
type cacheWriter struct {
	cacheTree
	conn *zk.Conn
	rate int // writes/s
}

// writeStats is what one writer run made.
type writeStats struct {
	writes  int              // writes made, the final one included
	last    map[string]int64 // leaf → seq of its last write
	lastSeq int64            // seq of the final write (0 unstamped)
	elapsed time.Duration    // from the first write to the final one's return
}

// stampData is a write's data: "seq sendUnixNs " padded to cacheDataSize;
// the send time is taken now, just before the request goes out.
func stampData(seq int64) []byte {
	b := fmt.Appendf(make([]byte, 0, cacheDataSize), "%d %d ", seq, time.Now().UnixNano())
	for len(b) < cacheDataSize {
		b = append(b, '.')
	}
	return b
}

// run writes for d at w.rate, write i (from 1) at i/rate after the start
// (a lane that falls behind catches up), each stamped with its seq, or 0
// when !stamped (a warm-up, which the drivers ignore). A stamped run ends
// with one more write, made after every other returned: the final one, the
// last in the server's order, for which the drivers wait.
func (w *cacheWriter) run(ctx context.Context, d time.Duration, stamped bool) (writeStats, error) {
	n := int(float64(w.rate) * d.Seconds())
	st := writeStats{last: map[string]int64{}}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	set := func(leaf string, seq int64) {
		stamp := seq
		if !stamped {
			stamp = 0
		}
		if _, err := w.conn.Set(w.root+"/"+leaf, stampData(stamp), -1); err != nil {
			once.Do(func() { first = fmt.Errorf("set %s: %w", leaf, err) })
		}
	}
	var lanes [writerLanes]chan int
	for l := range lanes {
		lanes[l] = make(chan int, n+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lanes[l] {
				set(w.leaves[i%len(w.leaves)], int64(i/len(w.leaves))+1)
			}
		}()
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		timer.Reset(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(w.rate))))
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		k := rand.IntN(len(w.leaves))
		st.last[w.leaves[k]] = int64(i) + 1
		lanes[k%writerLanes] <- i*len(w.leaves) + k // seq i+1 and leaf k in one int
		st.writes++
	}
	for _, l := range lanes {
		close(l)
	}
	wg.Wait()
	if stamped && ctx.Err() == nil {
		k := rand.IntN(len(w.leaves))
		st.lastSeq = int64(n) + 1
		set(w.leaves[k], st.lastSeq)
		st.last[w.leaves[k]] = st.lastSeq
		st.writes++
	}
	st.elapsed = time.Since(start)
	if first == nil {
		first = context.Cause(ctx)
	}
	return st, first
}
