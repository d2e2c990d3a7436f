package nemesis

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// adminConn is the admin connection: straight to the servers (no proxy),
// for setting the run up, the delete-dir fault, and the checks after it.
type adminConn struct {
	conn *zk.Conn
	once sync.Once
	done chan struct{}
}

func dialAdmin(ctx context.Context, cl *zktest.Cluster) (*adminConn, error) {
	conn, events, err := zk.Connect(cl.Addrs(), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, fmt.Errorf("nemesis: admin connection: %w", err)
	}
	a := &adminConn{conn: conn, done: make(chan struct{})}
	connected := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(a.done)
		for ev := range events {
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(connected) })
			}
		}
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-connected:
		return a, nil
	case <-t.C:
		err = errors.New("no session within 30 s")
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	a.close()
	return nil, fmt.Errorf("nemesis: admin connection: %w", err)
}

func (a *adminConn) close() {
	a.once.Do(func() {
		a.conn.Close()
		<-a.done
	})
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// deleteAll deletes p and everything below it, retrying while clients add
// children meanwhile.
func deleteAll(conn *zk.Conn, p string) error {
	for attempt := 0; ; attempt++ {
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, ch := range children {
			if err := deleteAll(conn, path.Join(p, ch)); err != nil {
				return err
			}
		}
		err = conn.Delete(p, -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrNotEmpty) && attempt < 20:
			continue
		default:
			return err
		}
	}
}

// createAll creates p (with data) and its missing parents as persistent
// znodes.
func createAll(conn *zk.Conn, p string, data []byte) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := ""
	for i, part := range parts {
		cur += "/" + part
		var d []byte
		if i == len(parts)-1 {
			d = data
		}
		if _, err := conn.Create(cur, d, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}

// listAll lists every znode below p (not p itself).
func listAll(conn *zk.Conn, p string) ([]string, error) {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range children {
		cp := path.Join(p, ch)
		out = append(out, cp)
		below, err := listAll(conn, cp)
		if err != nil {
			return nil, err
		}
		out = append(out, below...)
	}
	return out, nil
}

// watchCount sums the watches of every server.
func watchCount(ctx context.Context, cl *zktest.Cluster) (int, error) {
	total := 0
	for _, a := range cl.Addrs() {
		n, err := zktest.WatchCount(ctx, a)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
