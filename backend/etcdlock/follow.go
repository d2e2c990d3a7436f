package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Why a watch of a followed range was given up for a new read of it.
var (
	errCompacted     = errors.New("etcdlock: watch: compacted")
	errWatchClosed   = errors.New("etcdlock: watch: closed")
	errWatchCanceled = errors.New("etcdlock: watch: cancelled by the server")
	errSilentChange  = errors.New("etcdlock: watch: silent while the range changed")
)

// follower is one read-then-watch loop over a key range, the mechanism of
// Group.Watch, Value.Watch and Cache: it reads the range at one revision,
// then watches it from the next revision applying each watch response,
// and reads it again when the watch ends (run). What differs between its
// users are its fields; the watch, its retries, the backoff, compaction,
// the silent watch's check and ctx's end are its own. A follower holds no
// state of a run: its functions hold what was read and applied.
type follower struct {
	// s is the Session whose client reads and watches the range.
	s *Session
	// log carries the attributes that name what is followed.
	log *slog.Logger
	// prefix starts each message logged ("etcdlock: group watch: "), and
	// subject names the range in them ("the group").
	prefix, subject string
	// key and end are the range: [key, end), or the key alone if end is "".
	key, end string
	// read reads the range at one revision (retrying what it may retry),
	// applies it, and returns its revision.
	read func(ctx context.Context) (int64, error)
	// apply applies one watch response (a batch of events, or a progress
	// notification without any); an error gives up the watch.
	apply func(wr clientv3.WatchResponse) error
	// expect returns how many keys the range holds as read and applied so
	// far, and the revision up to which it was followed.
	expect func() (keys, rev int64)
}

// run reads and follows the range until ctx ends (nil) or an error that no
// retry cures (returned): a permanent one (recipe.Permanent) or a range
// over its limits (recipe.ErrCacheFull). A compacted watch is followed by
// a new read at once (logged at Debug), any other failure by one after a
// backoff (logged at Warn), which starts again from its shortest wait
// after a watch that lasted longer than its longest.
func (f *follower) run(ctx context.Context) error {
	b := loop.BackOff(retryFirst, retryMax)
	for {
		rev, err := f.read(ctx)
		if err == nil {
			began := time.Now()
			err = f.follow(ctx, rev)
			if time.Since(began) > retryMax {
				b.Reset() // it followed for a while: this failure is not the last one's sequel
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case recipe.Permanent(err), errors.Is(err, recipe.ErrCacheFull):
			return err
		case errors.Is(err, errCompacted):
			f.log.Debug(f.prefix+"compacted; reading "+f.subject+" again", "err", err)
			b.Reset()
			continue
		}
		f.log.Warn(f.prefix+"reading "+f.subject+" again", "err", err)
		if loop.Pause(ctx, b, retryMax) != nil {
			return nil
		}
	}
}

// follow watches the range from the revision after rev, applying each
// watch response, until ctx ends (nil) or the watch does not do any more
// (why). A watch silent for a while is checked by one read (unchanged):
// after a TTL, and a TTL more per page of keys in the range (cachePage),
// so that the server reads at most about a page of keys per TTL for it.
func (f *follower) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := f.s.cli.Watch(wctx, f.key, slices.Concat(f.rangeOpts(), []clientv3.OpOption{clientv3.WithRev(rev + 1), clientv3.WithProgressNotify()})...)
	limit := func() time.Duration {
		keys, _ := f.expect()
		return silentWatchLimit(f.s.TTL()) * time.Duration(1+keys/cachePage)
	}
	silent := time.NewTimer(limit())
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case wr, ok := <-ch:
			if err := f.failed(wr, ok); err != nil {
				return err
			}
			if err := f.apply(wr); err != nil {
				return err
			}
		case <-silent.C:
			if err := f.unchanged(ctx); err != nil {
				return err
			}
		}
		silent.Reset(limit())
	}
}

// failed returns why the watch gives up with wr (ok false: its channel
// closed), or nil when wr is to be applied.
func (f *follower) failed(wr clientv3.WatchResponse, ok bool) error { return watchErr(f.key, wr, ok) }

// watchErr returns why a watch of key gives up with wr (ok false: its
// channel closed), or nil when wr is to be applied.
func watchErr(key string, wr clientv3.WatchResponse, ok bool) error {
	switch {
	case !ok:
		return errWatchClosed
	case wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted):
		return fmt.Errorf("%w at revision %d", errCompacted, wr.CompactRevision)
	case wr.Err() != nil:
		return opError("watch", key, wr.Err())
	case wr.Canceled:
		return errWatchCanceled
	}
	return nil
}

// unchanged checks that the range holds what expect says: the check of a
// watch silent for a while.
func (f *follower) unchanged(ctx context.Context) error {
	keys, rev := f.expect()
	return f.holds(ctx, keys, rev)
}

// holds checks, with one read of two small answers, that the range holds
// keys keys and none written after rev (the newest key by mod revision,
// keys only: a count with WithMinModRev would not do, as etcd counts the
// whole range whatever the filter); otherwise the watch missed a change
// (or is about to deliver it): errSilentChange, and the range is read
// again.
func (f *follower) holds(ctx context.Context, keys, rev int64) error {
	rng := f.rangeOpts()
	count := slices.Concat(rng, []clientv3.OpOption{clientv3.WithCountOnly()})
	newest := slices.Concat(rng, []clientv3.OpOption{clientv3.WithKeysOnly(), clientv3.WithLimit(1),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)})
	var resp *clientv3.TxnResponse
	_, err := try(ctx, attemptTimeout(f.s.cfg.ttl), func(ctx context.Context) (err error) {
		resp, err = f.s.cli.Txn(ctx).Then(clientv3.OpGet(f.key, count...), clientv3.OpGet(f.key, newest...)).Commit()
		return err
	})
	if err != nil {
		return err
	}
	n, last := resp.Responses[0].GetResponseRange().Count, resp.Responses[1].GetResponseRange().Kvs
	if n != keys || len(last) > 0 && last[0].ModRevision > rev {
		return errSilentChange
	}
	return nil
}

// rangeOpts are the options that make a request of f.key one of the range.
func (f *follower) rangeOpts() []clientv3.OpOption {
	if f.end == "" {
		return nil
	}
	return []clientv3.OpOption{clientv3.WithRange(f.end)}
}
