package zookeeper

import "fmt"

// Format prints the Session as "zookeeper.Session{id: 0x...}" for every
// verb (%v, %+v, %#v, %s, %d, ...). fmt would otherwise print its fields:
// the bytes given to WithAuth among them (a password, in decimal or hex),
// read without the locks that guard the rest, a data race with the
// Session's goroutines.
func (s *Session) Format(f fmt.State, verb rune) {
	if s == nil {
		fmt.Fprint(f, "(*zookeeper.Session)(nil)")
		return
	}
	var id int64
	if s.conn != nil {
		id = s.conn.SessionID() // atomic: no lock, so printing under one is safe
	}
	fmt.Fprintf(f, "zookeeper.Session{id: %#x}", id)
}
