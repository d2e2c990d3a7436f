package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/cache"
	"github.com/zkrecipes/zkrecipes/internal/shortpath"
	"github.com/zkrecipes/zkrecipes/recipe"
)

const watchUsage = `Usage: zkrecipes watch [flags] PATH

Print the content of PATH (a cache of it: recipe.Cache), then every change
as it happens, until SIGINT or SIGTERM (exit 0). One line per node:

  KIND PATH created=CREATED modified=MODIFIED data="DATA"

KIND is created, changed or deleted (a deleted node shows its last state);
CREATED and MODIFIED are the node's revisions (ZooKeeper czxid and mzxid,
etcd create and mod revision); DATA is always quoted as a Go string
(strconv.Quote), PATH only when it holds a space, a quote, a backslash or
what is not printable. The content comes first, as created lines, then the
line "initialized rev=REV": everything before it was PATH as the server held
it at REV; every line after it is a change. watch only reads: it writes no
znode or key.

The service is the one --servers (or ZK_SERVERS) names:
  host:port,host:port[/chroot]           ZooKeeper: PATH is a znode path, e.g. /config
  etcd://host:2379[,host:2379][/prefix]  etcd: PATH is a name with the lock names' rules
Watching works with ZooKeeper and etcd only.

Examples:
  zkrecipes watch /config                         # the subtree, then its changes, until Ctrl-C
  zkrecipes watch --mode children /groups/workers
  zkrecipes watch --once --json /config | jq -r '.path + " " + (.data | @base64d)'
  zkrecipes watch --servers etcd://e1:2379/myapp config

Exit statuses: 0 (also when interrupted); 64 usage (also a backend other
than ZooKeeper or etcd); 69 server unreachable or the connection lost;
70 other error (an ACL refusal, more nodes or bytes than the cache holds).
`

// watchOnly is the usage error for a backend without caches.
const watchOnly = "watch works with ZooKeeper and etcd: PostgreSQL, Redis and Kubernetes have no watch or cache (see docs/cache.md)"

// watchModes are --mode's values.
var watchModes = map[string]recipe.CacheMode{"tree": recipe.CacheTree, "children": recipe.CacheChildren, "node": recipe.CacheNode}

type watchFlags struct {
	common
	mode string
	json bool
	once bool
}

func runWatch(args []string, stdout, stderr io.Writer) int {
	var f watchFlags
	fs := newFlagSet("watch", watchUsage, stdout, stderr)
	f.register(fs, false, "warn")
	fs.Lookup("servers").Usage += "; or etcd://host:port[,host:port][/prefix]"
	fs.StringVar(&f.mode, "mode", "tree", "what to hold: `tree` (PATH and every node below it), children (PATH and its children) or node (PATH alone)")
	fs.BoolVar(&f.json, "json", false, `print one JSON object per line: {"kind", "rev", "path", "created", "modified", "data"}, data in base64`)
	fs.BoolVar(&f.once, "once", false, "print the content (as one snapshot) and the initialized line, then exit")
	pos, cmd, code := parseArgs(fs, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 || cmd != nil {
		return usageError(stderr, fs, "want exactly one PATH, got %q", append(pos, cmd...))
	}
	mode, ok := watchModes[f.mode]
	if !ok {
		return usageError(stderr, fs, "--mode %q: want tree, children or node", f.mode)
	}
	if code := f.checkWatch(stderr, fs, pos[0]); code >= 0 {
		return code
	}
	return watchMain(&f, pos[0], mode, stdout, stderr)
}

// checkWatch checks the common flags, that the backend has caches, the
// flags that mean nothing for it, and the path or name; -1 when all is
// well, else the exit status (a usage error printed).
func (f *watchFlags) checkWatch(stderr io.Writer, fs *flag.FlagSet, name string) int {
	if err := f.check(); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if f.backend != zkBackend && f.backend != etcdBackend {
		return usageError(stderr, fs, "--servers names %s (%s): %s", f.backend, redact(f.servers), watchOnly)
	}
	if err := checkBackendFlags(fs, f.backend); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	if f.backend == zkBackend {
		return checkPath(stderr, fs, name)
	}
	if err := etcdlock.CheckName(name); err != nil {
		return usageError(stderr, fs, "invalid name: %v", err)
	}
	return -1
}

// openCache connects to the service of --servers and starts the cache of
// name on it; on failure it logs and returns the exit status (-1 on
// success), and a func that closes the cache, then the session.
func (f *watchFlags) openCache(ctx context.Context, log *slog.Logger, met *metricsServer, name string, mode recipe.CacheMode) (recipe.Cache, func(), int) {
	if f.backend == zkBackend {
		s, code := f.connect(ctx, log, met.option()...)
		if code >= 0 {
			return nil, nil, code
		}
		c, err := cache.New(s, name, cache.WithMode(mode))
		if err != nil {
			s.Close()
			return nil, nil, cacheStatus(ctx, log, err)
		}
		return c, func() { c.Close(); s.Close() }, -1
	}
	cctx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	defer cancel()
	s, err := f.connectEtcd(cctx, log, defaultTTL, etcdlock.WithMetrics(met.metrics()))
	if err != nil {
		return nil, nil, connectStatus(log, f.backend, f.servers, err)
	}
	c, err := etcdlock.NewCache(s, name, etcdlock.WithCacheMode(mode))
	if err != nil {
		s.Close()
		return nil, nil, cacheStatus(ctx, log, err)
	}
	return c, func() { c.Close(); s.Close() }, -1
}

func watchMain(f *watchFlags, name string, mode recipe.CacheMode, stdout, stderr io.Writer) int {
	log := f.logger(stderr).With("path", shortpath.Of(name), "backend", string(f.backend))
	ctx, met, end, code := startReadOnly(f.metricsAddr, log)
	if code >= 0 {
		return code
	}
	defer end()
	c, closeCache, code := f.openCache(ctx, log, met, name, mode)
	if code >= 0 {
		return code
	}
	defer closeCache()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	p := eventPrinter{w: w, json: f.json}
	if f.once {
		// Bounded, for cron: a server lost after the connect would leave
		// the snapshot waiting for good.
		sctx, cancel := context.WithTimeoutCause(ctx, f.connectTimeout,
			fmt.Errorf("%w: no whole state of the server within --connect-timeout %v", recipe.ErrUnreachable, f.connectTimeout))
		snap, err := c.Snapshot(sctx)
		cancel()
		if err != nil {
			return cacheStatus(ctx, log, err)
		}
		for _, n := range snap.Nodes {
			p.print(recipe.CacheEvent{Kind: recipe.NodeCreated, Node: n, Rev: snap.Rev})
		}
		p.print(recipe.CacheEvent{Kind: recipe.CacheInitialized, Rev: snap.Rev})
		return 0
	}
	events := c.Listen(ctx)
	for {
		var e recipe.CacheEvent
		var ok bool
		select {
		case e, ok = <-events:
		default:
			w.Flush() // nothing more queued: show what was printed
			e, ok = <-events
		}
		if !ok {
			break
		}
		p.print(e)
	}
	w.Flush()
	if ctx.Err() != nil {
		return 0
	}
	err := c.Err()
	if err == nil {
		err = errors.New("the cache's events ended")
	}
	return cacheStatus(ctx, log, err)
}

// cacheStatus logs why starting, reading or following the cache failed and
// returns the exit status: 0 if interrupted, 64 for a path or option the
// backend refuses, 69 for a server that cannot be reached or a connection
// or session lost, 70 for every other failure (a cache over its limits, an
// ACL refusal).
func cacheStatus(ctx context.Context, log *slog.Logger, err error) int {
	switch {
	case ctx.Err() != nil:
		return 0
	case errors.Is(err, recipe.ErrInvalidPath), errors.Is(err, recipe.ErrBadOption):
		log.Error("cannot watch the path", "err", err)
		return exitUsage
	case errors.Is(err, recipe.ErrCacheFull):
		log.Error(fmt.Sprintf("the cache is over its limits (%d nodes, %d bytes of paths and data): watch a smaller subtree, or --mode children or node",
			recipe.DefaultCacheMaxNodes, recipe.DefaultCacheMaxBytes), "err", err)
		return exitSoftware
	case errors.Is(err, recipe.ErrNoPermission):
		log.Error("watching failed: permission denied (with ZooKeeper: the nodes' ACL; give credentials it grants, --auth-file or "+envAuth+")", "err", err)
		return exitSoftware
	case unavailable(err), errors.Is(err, recipe.ErrSessionClosed):
		log.Error("watching failed: the connection or session was lost", "err", err)
		return exitUnavailable
	}
	log.Error("watching failed", "err", err)
	return exitSoftware
}

// WatchEvent is one line of watch --json: a node's event (created, changed,
// deleted) or the initialized line (kind and rev only).
type WatchEvent struct {
	Kind string `json:"kind"`
	// Rev is the point of the server's order at which the event held
	// (recipe.CacheEvent.Rev); the snapshot's for --once.
	Rev int64 `json:"rev"`
	*WatchNode
}

// WatchNode is the node of a WatchEvent.
type WatchNode struct {
	Path     string `json:"path"`
	Created  int64  `json:"created"`
	Modified int64  `json:"modified"`
	Data     []byte `json:"data"` // base64, as encoding/json writes []byte
}

// eventPrinter prints cache events as text or JSON lines.
type eventPrinter struct {
	w    io.Writer
	json bool
}

// print prints e on one line.
func (p eventPrinter) print(e recipe.CacheEvent) {
	if p.json {
		we := WatchEvent{Kind: e.Kind.String(), Rev: e.Rev}
		if e.Kind != recipe.CacheInitialized {
			data := e.Node.Data
			if data == nil {
				data = []byte{}
			}
			we.WatchNode = &WatchNode{Path: e.Node.Path, Created: e.Node.Created, Modified: e.Node.Modified, Data: data}
		}
		json.NewEncoder(jsonWriter{p.w}).Encode(we) // escapes what terminals obey
		return
	}
	if e.Kind == recipe.CacheInitialized {
		fmt.Fprintf(p.w, "%s rev=%d\n", e.Kind, e.Rev)
		return
	}
	fmt.Fprintf(p.w, "%s %s created=%d modified=%d data=%s\n",
		e.Kind, watchPath(e.Node.Path), e.Node.Created, e.Node.Modified, strconv.Quote(string(e.Node.Data)))
}

// watchPath returns p as watch prints it: as it is when it is plain
// (termSafe) and holds no space and is not empty, else quoted, so that a
// line splits into its fields at spaces.
func watchPath(p string) string {
	if p == "" || strings.ContainsRune(p, ' ') {
		return strconv.Quote(p)
	}
	return termSafe(p)
}
