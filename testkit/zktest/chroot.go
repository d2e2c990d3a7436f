package zktest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkLogger adapts go-zookeeper's Printf logger to slog at debug level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// withConn opens a plain (chroot-less) session to addrs, runs fn, and closes
// the session, waiting until the client's goroutines are gone.
func withConn(ctx context.Context, addrs []string, logger *slog.Logger, fn func(*zk.Conn) error) error {
	conn, events, err := zk.Connect(addrs, 10*time.Second,
		zk.WithLogInfo(false), zk.WithLogger(zkLogger{logger}))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", strings.Join(addrs, ","), err)
	}
	defer func() {
		conn.Close()
		// The event channel is closed when the client's loop has ended.
		drain := time.NewTimer(10 * time.Second)
		defer drain.Stop()
		for {
			select {
			case _, ok := <-events:
				if !ok {
					return
				}
			case <-drain.C:
				return
			}
		}
	}()
	for conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("connecting to %s: %w", strings.Join(addrs, ","), context.Cause(ctx))
		case <-events:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fn(conn)
}

// createChroot creates p and its missing parents as persistent znodes.
func createChroot(ctx context.Context, addrs []string, p string, logger *slog.Logger) error {
	err := withConn(ctx, addrs, logger, func(conn *zk.Conn) error {
		return createAll(conn, p)
	})
	if err != nil {
		return fmt.Errorf("creating chroot %s: %w", p, err)
	}
	return nil
}

func createAll(conn *zk.Conn, p string) error {
	cur := ""
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		cur += "/" + part
		_, err := conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}

// deleteChroot deletes p and everything under it.
func deleteChroot(ctx context.Context, addrs []string, p string, logger *slog.Logger) error {
	err := withConn(ctx, addrs, logger, func(conn *zk.Conn) error {
		return deleteAll(ctx, conn, p)
	})
	if err != nil {
		return fmt.Errorf("deleting chroot %s: %w", p, err)
	}
	return nil
}

// deleteAll deletes p depth-first. Clients that still run may add children
// meanwhile, so a non-empty node is retried a few times.
func deleteAll(ctx context.Context, conn *zk.Conn, p string) error {
	for attempt := 0; ; attempt++ {
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("children of %s: %w", p, err)
		}
		for _, ch := range children {
			if err := deleteAll(ctx, conn, path.Join(p, ch)); err != nil {
				return err
			}
		}
		err = conn.Delete(p, -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrNotEmpty) && attempt < 10 && ctx.Err() == nil:
			continue
		default:
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
}
