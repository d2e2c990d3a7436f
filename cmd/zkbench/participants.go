package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// runParticipants is zkbench -participants: for each size n, it fills a
// directory with n lock nodes (ephemeral, of a connection of its own, in
// the node-name grammar both ours and Curator's lock recipes parse), then
// lists it -rounds times with ours (mutex.Mutex.Participants: getChildren,
// getData of every node) and with Curator (LeaderSelector.getParticipants,
// peers/Participants.java, the same), each after one unmeasured listing,
// and prints the medians. Curator is skipped, with the reason, when it is
// not installed.
func runParticipants(ctx context.Context, o options) error {
	b := &bench{o: o}
	defer b.close()
	addrs, _, err := b.server(ctx)
	if err != nil {
		return err
	}
	if err := b.makeRoot(addrs); err != nil {
		return err
	}
	s, err := zookeeper.Connect(ctx, addrs, zookeeper.WithSessionTimeout(sessionTimeout),
		zookeeper.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	b.onClose(func() { s.Close() })
	curator, err := curatorCommand(ctx, b)
	if err != nil {
		logf("SKIPPING curator: %v", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "nodes\tours ms\tcurator ms\tcurator/ours\t\n")
	for _, n := range o.participants {
		dir := path.Join(b.root, fmt.Sprintf("participants-%d", n))
		fill, err := fillDir(addrs, dir, n)
		if err != nil {
			return fmt.Errorf("filling %s: %w", dir, err)
		}
		b.onClose(fill.Close) // an error below: the server drops the nodes
		m, err := mutex.New(s, dir)
		if err != nil {
			return err
		}
		ours, err := timeRounds(o.rounds, func() (int, error) {
			ps, err := m.Participants(ctx)
			return len(ps), err
		}, n)
		if err != nil {
			return fmt.Errorf("ours, %d nodes: %w", n, err)
		}
		cur, ratio := "-", "-"
		if curator != nil {
			ms, err := curator(ctx, strings.Join(addrs, ","), dir, n, o.rounds)
			if err != nil {
				return fmt.Errorf("curator, %d nodes: %w", n, err)
			}
			cur, ratio = fmt.Sprintf("%.0f", ms), fmt.Sprintf("%.1f×", ms/ours)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t\n", n, ours, cur, ratio)
		logf("%d nodes: ours %.0f ms, curator %s ms (medians of %d)", n, ours, cur, o.rounds)
		fill.Close()
		if err := emptied(ctx, s.Conn(), dir); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// fillDir creates dir (and its parents) and n ephemeral sequential lock
// nodes in it, in multis of 500 creates, on a connection of its own, which
// it returns: closing it makes the server delete the nodes.
func fillDir(addrs []string, dir string, n int) (*zk.Conn, error) {
	c, _, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	acl := zk.WorldACL(zk.PermAll)
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		if _, err := c.Create(dir[:i], nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			c.Close()
			return nil, err
		}
	}
	for made := 0; made < n; {
		ops := make([]any, min(500, n-made))
		for i := range ops {
			var guid [16]byte
			rand.Read(guid[:])
			ops[i] = &zk.CreateRequest{Path: dir + "/_c_" + hex.EncodeToString(guid[:]) + "-" + mutex.Kind,
				Data: []byte("contender"), Acl: acl, Flags: zk.FlagEphemeral | zk.FlagSequence}
		}
		if _, err := c.Multi(ops...); err != nil {
			c.Close()
			return nil, err
		}
		made += len(ops)
	}
	return c, nil
}

// emptied waits (up to a minute) until the server has deleted the nodes
// of dir's closed fill connection, so that the next size is measured on
// a quiet server and the run's cleanup finds dir empty.
func emptied(ctx context.Context, c *zk.Conn, dir string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, st, err := c.Exists(dir)
		if err != nil {
			return err
		}
		if st.NumChildren == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still holds %d nodes a minute after their session closed", dir, st.NumChildren)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// timeRounds calls list once, then rounds times, and returns the median
// time of the timed calls in ms; every call must list want nodes.
func timeRounds(rounds int, list func() (int, error), want int) (float64, error) {
	var ms []float64
	for i := 0; i <= rounds; i++ {
		start := time.Now()
		n, err := list()
		if err != nil {
			return 0, err
		}
		if n != want {
			return 0, fmt.Errorf("listed %d nodes, want %d", n, want)
		}
		if i > 0 {
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
	}
	slices.Sort(ms)
	return ms[len(ms)/2], nil
}

// curatorCommand compiles peers/Participants.java and returns a function
// that runs it on a directory and returns its median time in ms.
func curatorCommand(ctx context.Context, b *bench) (func(ctx context.Context, servers, dir string, want, rounds int) (float64, error), error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: no java on PATH", errNotInstalled)
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, fmt.Errorf("%w: no javac on PATH", errNotInstalled)
	}
	tmp, err := os.MkdirTemp("", "zkbench-")
	if err != nil {
		return nil, err
	}
	b.onClose(func() { os.RemoveAll(tmp) })
	if err := writeSources(tmp); err != nil {
		return nil, err
	}
	cp, err := curatorClasspath(ctx, javac, tmp, "Participants.java")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, servers, dir string, want, rounds int) (float64, error) {
		// A listing of 50,000 nodes is a reply of about 3 MB: over the Java
		// client's default jute.maxbuffer (1 MB), under 64 MB.
		c := exec.CommandContext(ctx, java, "-Xmx1g", "-Djute.maxbuffer=67108864", "-cp", cp,
			"Participants", servers, dir, fmt.Sprint(rounds))
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return 0, fmt.Errorf("%v: %s", err, tail(stderr.String(), 2000))
		}
		var ms []float64
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			var r struct {
				Participants int
				MS           float64
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return 0, fmt.Errorf("driver line %q: %w", sc.Text(), err)
			}
			if r.Participants != want {
				return 0, fmt.Errorf("listed %d nodes, want %d", r.Participants, want)
			}
			ms = append(ms, r.MS)
		}
		if len(ms) != rounds {
			return 0, fmt.Errorf("%d timings for %d rounds: %s", len(ms), rounds, tail(stderr.String(), 2000))
		}
		slices.Sort(ms)
		return ms[len(ms)/2], nil
	}, nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
