package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// cacheRow is one row of the cache table: cell gives a peer's figure as
// shown and as a number for the ratio (NaN: no ratio; ok false: "-").
type cacheRow struct {
	name string
	cell func(r CacheResult) (text string, v float64, ok bool)
}

// loaded and watched say whether the load and write phases measured r.
func loaded(r CacheResult) bool  { return len(r.LoadMs) > 0 }
func watched(r CacheResult) bool { return len(r.Phases) > 0 && r.Error == "" }

var cacheRows = []cacheRow{
	{"initial load, ms (median)", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.1f", r.LoadMsMedian), r.LoadMsMedian, loaded(r)
	}},
	{"heap, B per node held (median)", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.0f", r.HeapPerNodeMedian), r.HeapPerNodeMedian, loaded(r)
	}},
	{"first load (cold, fresh session), ms", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.1f", r.FirstLoadMs), r.FirstLoadMs, loaded(r)
	}},
	{"first load: heap, B per node held", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.0f", r.FirstHeapPerNode), r.FirstHeapPerNode, loaded(r)
	}},
	{"heap, B per node held, min-max of loads", func(r CacheResult) (string, float64, bool) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range r.HeapPerNode {
			lo, hi = min(lo, v), max(hi, v)
		}
		return fmt.Sprintf("%.0f-%.0f", lo, hi), math.NaN(), loaded(r)
	}},
	{"heap noise, B (spread of settled samples)", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprint(r.HeapNoise), math.NaN(), loaded(r)
	}},
	{"event latency p50, ms", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.2f", r.P50us/1000), r.P50us, watched(r)
	}},
	{"event latency p99, ms", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.2f", r.P99us/1000), r.P99us, watched(r)
	}},
	{"event latency max, ms", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.2f", r.MaxUs/1000), r.MaxUs, watched(r)
	}},
	{"writes seen, % (more is better)", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.2f", 100*float64(r.Seen)/float64(r.Writes)), math.NaN(), watched(r)
	}},
	{"leaves whose last write was seen", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%d/%d", r.LastOK, r.LastOf), math.NaN(), watched(r)
	}},
	{"client CPU, s per write phase", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.2f", r.ClientCPUs), r.ClientCPUs, watched(r) && r.ClientCPUs >= 0
	}},
	{"server CPU, s per write phase", func(r CacheResult) (string, float64, bool) {
		return fmt.Sprintf("%.2f", r.ServerCPUs), r.ServerCPUs, watched(r) && r.ServerCPUs >= 0
	}},
	{"server packets per write", func(r CacheResult) (string, float64, bool) {
		v := r.Packets / (float64(r.Writes) / float64(len(r.Phases)))
		return fmt.Sprintf("%.2f", v), v, watched(r) && r.Packets >= 0
	}},
}

// printCacheTable writes the cache results, ours and Curator's side by
// side with their ratio, then each peer's error.
func printCacheTable(w io.Writer, o options, server string, t cacheTree, rs []CacheResult) {
	by := map[string]CacheResult{}
	for _, r := range rs {
		by[r.Peer] = r
	}
	ours, cur := by["ours"], by["curator"]
	fmt.Fprintf(w, "\ncache of %d leaves (%d directories of up to %d, %d B of data each), %d nodes held; %s\n",
		len(t.leaves), t.dirs, cacheFanout, cacheDataSize, t.held(), server)
	fmt.Fprintf(w, "load, heap: medians of %d loads per peer (after 1 unmeasured), peer order rotated per round\n", o.rounds)
	fmt.Fprintf(w, "write phases: %d per peer, peer order rotated per round, each %d writes/s asked for %v after %v unmeasured; made:",
		o.rounds, o.cache.rate, o.cache.writeTime, min(cacheWarmup, o.cache.writeTime))
	for _, r := range rs {
		if watched(r) {
			fmt.Fprintf(w, " %s %d at %.0f/s;", r.Peer, r.Writes, r.WritesPerS)
		}
	}
	fmt.Fprintln(w, "\nlatency: receive - send time of every write seen, over every phase; CPU, packets: medians of the phases")
	fmt.Fprintln(w, "ratio = ours / curator: for time, memory, CPU and packets, lower is better")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-44s\tours\tcurator\tours/curator\t\n", "metric")
	for _, row := range cacheRows {
		cells := [2]string{"-", "-"}
		var vals [2]float64
		oks := [2]bool{}
		for i, r := range []CacheResult{ours, cur} {
			if r.Peer == "" {
				continue
			}
			var text string
			text, vals[i], oks[i] = row.cell(r)
			if oks[i] {
				cells[i] = text
			}
		}
		ratio := "-"
		if oks[0] && oks[1] && !math.IsNaN(vals[0]) && vals[1] > 0 {
			ratio = fmt.Sprintf("%.2f×", vals[0]/vals[1])
		}
		fmt.Fprintf(tw, "%-44s\t%s\t%s\t%s\t\n", row.name, cells[0], cells[1], ratio)
	}
	tw.Flush()
	for _, name := range []string{"ours", "curator"} {
		switch r, ok := by[name]; {
		case !ok:
			fmt.Fprintf(w, "%s: not run (see the log)\n", name)
		case r.Error != "":
			fmt.Fprintf(w, "%s: ERROR %s\n", name, r.Error)
		}
	}
}
