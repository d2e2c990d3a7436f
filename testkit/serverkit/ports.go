package serverkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago, for test servers of any kind (every backend's harness), and
// reserves them against every other FreePorts call of this user on this
// machine, in this process or another, until ReleasePorts or the end of the
// process. A harness keeps them reserved while its server is stopped, so
// that a parallel test binary cannot take a port before the restart.
//
// They are drawn at random below the usual ephemeral range (32768+), so
// that they rarely clash with outgoing connections. A program that does
// not use FreePorts can still take a port first: the caller must see that
// failure and start again on fresh ports. The reservation is a lock file
// per port under the user's cache directory (zkrecipes/ports); where that
// directory cannot be made, it holds within this process only. An n below
// 0 or above MaxPorts returns an error matching ErrPortCount.
func FreePorts(n int) ([]int, error) {
	if n < 0 || n > MaxPorts {
		return nil, fmt.Errorf("%w: FreePorts(%d), want 0 to %d", ErrPortCount, n, MaxPorts)
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	// take listens on p (0: one the kernel picks) and keeps it if it can
	// reserve it. A port in the drawn range is reserved before the probe,
	// so that the probe never touches one another harness holds.
	take := func(p int) {
		if p != 0 && !reserve(p) {
			return
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		switch {
		case err != nil:
			ReleasePorts(p)
			return
		case p == 0:
			if p = l.Addr().(*net.TCPAddr).Port; !reserve(p) {
				_ = l.Close()
				return
			}
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	for tries := 0; len(ports) < n && tries < 200*n; tries++ {
		take(20000 + rand.IntN(12000))
	}
	for tries := 0; len(ports) < n && tries < 200*n; tries++ {
		take(0)
	}
	if len(ports) < n {
		ReleasePorts(ports...)
		return nil, fmt.Errorf("serverkit: found %d of %d free ports", len(ports), n)
	}
	return ports, nil
}

// MaxPorts is the most ports one FreePorts call returns.
const MaxPorts = 1000

// ErrPortCount is FreePorts' error for a count outside 0..MaxPorts.
var ErrPortCount = errors.New("serverkit: port count out of range")

// ReleasePorts ends the reservation FreePorts made of each port; ports it
// does not hold are ignored. A harness calls it once its server has exited
// for good.
func ReleasePorts(ports ...int) {
	held.Lock()
	defer held.Unlock()
	for _, p := range ports {
		if f, ok := held.m[p]; ok {
			if f != nil {
				_ = f.Close() // drops the lock
			}
			delete(held.m, p)
		}
	}
}

// held maps each port this process reserved to its locked file (nil when
// the lock directory is unusable).
var held = struct {
	sync.Mutex
	m map[int]*os.File
}{m: map[int]*os.File{}}

// lockDir is where the lock files live, "" when it cannot be made.
var lockDir = sync.OnceValue(func() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	d = filepath.Join(d, "zkrecipes", "ports")
	if os.MkdirAll(d, 0o700) != nil {
		return ""
	}
	return d
})

// reserve takes port p for this process; false if this process or another
// already holds it.
func reserve(p int) bool {
	held.Lock()
	defer held.Unlock()
	if _, ok := held.m[p]; ok {
		return false
	}
	var f *os.File
	if d := lockDir(); d != "" {
		var err error
		if f, err = os.OpenFile(filepath.Join(d, strconv.Itoa(p)), os.O_RDONLY|os.O_CREATE, 0o600); err != nil {
			return false
		}
		if !tryLock(f) {
			_ = f.Close()
			return false
		}
	}
	held.m[p] = f
	return true
}
