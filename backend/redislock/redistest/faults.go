package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The faults of this file act on a running server, as the nemesis does
// (backend/redislock/redisnemesis): the process frozen (Pause, Resume), its
// clients' connections closed by the server (KillClients), the server busy
// in one command (Sleep). Kill and Restart (redistest.go) are the crash.

// WithDebugCommand allows the DEBUG command from local connections
// (enable-debug-command local): Redis 7 refuses DEBUG by default, and Sleep
// needs DEBUG SLEEP. Redis before 7 has no such setting (and allows DEBUG):
// do not use it there.
func WithDebugCommand() Option {
	return func(args *[]string) { *args = append(*args, "--enable-debug-command", "local") }
}

// Pause stops the server with SIGSTOP (the whole process family, a forked
// AOF rewrite included): it accepts no connection and answers nothing until
// Resume, while the kernel still queues what clients send it. Kill and
// Restart work on a paused server (SIGKILL ends a stopped process). It
// returns ErrUnsupported on the server of REDIS_TEST_ADDR and an error on a
// killed server.
func (s *Server) Pause() error { return s.signal("pause", syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT; it is harmless on a
// running one. It returns ErrUnsupported on the server of REDIS_TEST_ADDR
// and an error on a killed server.
func (s *Server) Resume() error { return s.signal("resume", syscall.SIGCONT) }

func (s *Server) signal(op string, sig syscall.Signal) error {
	if s.external {
		return fmt.Errorf("%s %s (%s): %w", op, s.addr, EnvAddr, ErrUnsupported)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("redistest: %s %s: the server is killed", op, s.addr)
	}
	select {
	case <-s.proc.gone:
		return fmt.Errorf("redistest: %s %s: the server has exited", op, s.addr)
	default:
	}
	if err := syscall.Kill(-s.proc.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("redistest: %s %s: %w", op, s.addr, err)
	}
	return nil
}

// admin runs f on a fresh direct connection to the server (not pooled with
// anything a test holds), closed when f returns.
func (s *Server) admin(f func(*redis.Client) error) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, TLSConfig: s.clientTLS(), ContextTimeoutEnabled: true,
		MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return f(c)
}

// ClientConn is one client connection as CLIENT LIST shows it.
type ClientConn struct {
	ID   int64
	Addr string // the client's host:port, as the server sees it
	Name string // CLIENT SETNAME's (go-redis: Options.ClientName, or client_name= in the URL)
	Sub  bool   // a pub/sub connection (subscribed to a channel or pattern)
}

// Clients lists the server's client connections whose name is name ("":
// every connection, the lister's own excluded).
func (s *Server) Clients(ctx context.Context, name string) ([]ClientConn, error) {
	var out []ClientConn
	err := s.admin(func(c *redis.Client) error {
		self, err := c.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		list, err := c.ClientList(ctx).Result()
		if err != nil {
			return err
		}
		for _, cc := range parseClientList(list) {
			if cc.ID != self && (name == "" || cc.Name == name) {
				out = append(out, cc)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redistest: CLIENT LIST: %w", err)
	}
	return out, nil
}

// parseClientList reads CLIENT LIST's lines of field=value pairs.
func parseClientList(list string) []ClientConn {
	var out []ClientConn
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		var cc ClientConn
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "id":
				cc.ID, _ = strconv.ParseInt(v, 10, 64)
			case "addr":
				cc.Addr = v
			case "name":
				cc.Name = v
			case "sub", "psub", "ssub":
				cc.Sub = cc.Sub || (v != "" && v != "0")
			}
		}
		if cc.ID != 0 {
			out = append(out, cc)
		}
	}
	return out
}

// KillClients makes the server close every connection of the clients named
// name (CLIENT KILL ID of each, pub/sub connections included) and returns
// how many it closed: the client sees its connections drop as on a server
// restart, while the server keeps every key. An empty name is refused.
func (s *Server) KillClients(ctx context.Context, name string) (int, error) {
	if name == "" {
		return 0, errors.New("redistest: KillClients needs a client name")
	}
	conns, err := s.Clients(ctx, name)
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.admin(func(c *redis.Client) error {
		for _, cc := range conns {
			k, err := c.ClientKillByFilter(ctx, "ID", strconv.FormatInt(cc.ID, 10)).Result()
			if err != nil {
				return err
			}
			n += int(k) // 0: it closed by itself in between
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("redistest: CLIENT KILL: %w", err)
	}
	return n, nil
}

// Sleep makes the server busy for d in one command (DEBUG SLEEP): it reads
// and answers nothing else meanwhile, and its clock runs on, so keys expire
// when it is done. It returns when the server is done (ctx bounds only the
// wait for the answer, not the sleep). The server must allow DEBUG
// (WithDebugCommand on Redis 7).
func (s *Server) Sleep(ctx context.Context, d time.Duration) error {
	err := s.admin(func(c *redis.Client) error {
		ctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
		defer cancel()
		return c.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err()
	})
	if err != nil {
		return fmt.Errorf("redistest: DEBUG SLEEP: %w", err)
	}
	return nil
}
