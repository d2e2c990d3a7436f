package recipe

// ConnState is the state of a backend session's connection to its server,
// with the names and meaning of Curator's ConnectionState.
type ConnState int

const (
	// StateConnected: the first session was established.
	StateConnected ConnState = iota + 1
	// StateSuspended: the connection is down or silent past the policy; the
	// session may live on at the server. By default every lease ends here.
	StateSuspended
	// StateReconnected: a connection is up again after SUSPENDED or LOST, in
	// the same session (its entries survived) or a new one (all is gone).
	StateReconnected
	// StateLost: the session expired, was presumed expired, or was closed;
	// everything granted under it is lost.
	StateLost
)

// String returns Curator's name for s: CONNECTED, SUSPENDED, RECONNECTED, LOST.
func (s ConnState) String() string {
	switch s {
	case StateConnected:
		return "CONNECTED"
	case StateSuspended:
		return "SUSPENDED"
	case StateReconnected:
		return "RECONNECTED"
	case StateLost:
		return "LOST"
	}
	return "UNKNOWN"
}

// IsConnected reports whether s is CONNECTED or RECONNECTED.
func (s ConnState) IsConnected() bool { return s == StateConnected || s == StateReconnected }
