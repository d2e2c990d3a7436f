package serverkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago, for test servers of any kind (every backend's harness). They
// are drawn at random below the usual ephemeral range (32768+), so that they rarely clash with outgoing connections or
// with the choices of other test binaries running in parallel. A port can
// still be taken before the server binds it: the caller must see that
// failure and start again on fresh ports.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n && tries < 200*n; tries++ {
		p := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("serverkit: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
