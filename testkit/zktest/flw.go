package zktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrNotServing is wrapped by FourLetter (and so Mntr and WatchCount) when
// the server answers that it is not currently serving requests, as a member
// of an ensemble does while it has no quorum.
var ErrNotServing = errors.New("zktest: server is not currently serving requests")

// defaultFLWTimeout bounds a four-letter word when ctx has no deadline.
const defaultFLWTimeout = 5 * time.Second

// FourLetter sends the four-letter word cmd (such as "ruok", "srvr", "mntr",
// "wchs", "cons") to the server at addr (host:port, no chroot) and returns its
// whole answer. ctx bounds the exchange; without a deadline it is limited to
// 5 s. Errors: cmd not four bytes long, dial or I/O failure, a command the
// server does not allow (not in 4lw.commands.whitelist), and ErrNotServing.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	if len(cmd) != 4 {
		return "", fmt.Errorf("zktest: four-letter word %q is not 4 bytes long", cmd)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultFLWTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, context.Cause(ctx))
		}
		return string(b), fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	out := string(b)
	switch {
	case strings.Contains(out, "not currently serving requests"):
		return out, fmt.Errorf("zktest: %s %s: %w", cmd, addr, ErrNotServing)
	case strings.Contains(out, "not in the whitelist"), strings.Contains(out, "not in the allow list"):
		return out, fmt.Errorf("zktest: %s %s: command not allowed (4lw.commands.whitelist): %s", cmd, addr, strings.TrimSpace(out))
	}
	return out, nil
}

// Mntr runs the "mntr" four-letter word on addr and returns its key/value
// lines, keyed as the server prints them ("zk_version", "zk_server_state",
// "zk_watch_count", ...). Errors are those of FourLetter, or a reply with no
// key/value line.
func Mntr(ctx context.Context, addr string) (map[string]string, error) {
	out, err := FourLetter(ctx, addr, "mntr")
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("zktest: mntr %s: unexpected reply %q", addr, out)
	}
	return m, nil
}

// WatchCount returns the total number of watches registered on the server at
// addr, from the "Total watches:" line of the "wchs" four-letter word. Each
// server only counts the watches of its own clients. Errors are those of
// FourLetter, or a reply without that line.
func WatchCount(ctx context.Context, addr string) (int, error) {
	out, err := FourLetter(ctx, addr, "wchs")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Total watches:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("zktest: wchs %s: %w", addr, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("zktest: wchs %s: unexpected reply %q", addr, out)
}

// serverMode returns the "Mode:" of srvr: standalone, leader, follower,
// observer or read-only.
func serverMode(ctx context.Context, addr string) (string, error) {
	out, err := FourLetter(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("zktest: srvr %s: no Mode in reply %q", addr, out)
}

// serverVersion returns the "Zookeeper version:" line of srvr, without its
// label.
func serverVersion(ctx context.Context, addr string) (string, error) {
	out, err := FourLetter(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Zookeeper version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("zktest: srvr %s: no version in reply %q", addr, out)
}
