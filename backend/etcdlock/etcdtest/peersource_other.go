//go:build !linux

package etcdtest

import "net"

// peerSource returns -1: outside Linux the owner of a socket is not known,
// so Partition blackholes only the links a cut-off member accepts (its
// peers' messages to it and its answers on their streams), not those it
// dials.
func peerSource(net.Conn, *Cluster) int { return -1 }
