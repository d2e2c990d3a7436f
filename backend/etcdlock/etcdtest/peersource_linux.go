package etcdtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// peerSource returns the index of the member of c whose process holds the
// other end of conn (a loopback connection accepted by the Cluster), or -1.
// The kernel knows: /proc/net/tcp gives the inode of the socket bound to
// conn's remote address and connected to its local one, and the owner is
// the member with a descriptor on that inode. etcd has no option to choose
// the source address of its peer connections, so nothing simpler tells two
// members apart.
func peerSource(conn net.Conn, c *Cluster) int {
	r, ok1 := conn.RemoteAddr().(*net.TCPAddr)
	l, ok2 := conn.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return -1
	}
	inode := socketInode(fmt.Sprintf(":%04X", r.Port), fmt.Sprintf(":%04X", l.Port))
	if inode == "" {
		return -1
	}
	want := "socket:[" + inode + "]"
	for i := range c.members {
		if pid := c.pid(i); pid > 0 && holds(pid, want) {
			return i
		}
	}
	return -1
}

// socketInode returns the inode of the IPv4 TCP socket whose local address
// ends with local and remote address with remote (":PORT" in hex), or "".
func socketInode(local, remote string) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && strings.HasSuffix(fs[1], local) && strings.HasSuffix(fs[2], remote) {
			return fs[9]
		}
	}
	return ""
}

// holds reports whether process pid has a descriptor whose link is want.
func holds(pid int, want string) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == want {
			return true
		}
	}
	return false
}
