package zookeeper

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxNodeReads bounds the reads of a directory's nodes (Participants, and
// readCzxids at the sequence limit) in flight at once on the Session. They
// are pipelined on its one connection, so reading n nodes costs about
// n/maxNodeReads round trips instead of n; the bound keeps a request the
// caller sends meanwhile on the same Session (a Release's delete) from
// queueing behind more than that many reads at the server.
const maxNodeReads = 128

// readEach calls read(i) for every i in [0, n), at most limit calls at a
// time, each on a goroutine of its own that takes the next index when its
// call returns. No call starts once ctx has ended or a call has failed:
// readEach then returns that call's error, or ctx's cause (read, built on
// requests.retry, returns it as soon as ctx ends: a request still in flight
// completes on the Session's workers). Every goroutine readEach starts has
// returned when it returns.
func readEach(ctx context.Context, n, limit int, read func(i int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
		failed  atomic.Bool
	)
	fail := func(err error) {
		errOnce.Do(func() { first = err })
		failed.Store(true)
	}
	for range min(n, limit) {
		wg.Go(func() {
			for !failed.Load() {
				if ctx.Err() != nil {
					fail(context.Cause(ctx))
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := read(i); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
