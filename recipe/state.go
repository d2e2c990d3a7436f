package recipe

// ConnState is the state of a backend session's connection to its server,
// with the names and meaning of Curator's ConnectionState.
type ConnState int

const (
	// StateConnected: the first session was established.
	StateConnected ConnState = iota + 1
	// StateSuspended: the connection is down (or no server has replied for
	// longer than the policy allows); the session may still be alive at the
	// server. Under the default policy every lease ends here.
	StateSuspended
	// StateReconnected: a connection is up again after SUSPENDED or LOST. The
	// session ID tells whether it is the same session (its entries survived)
	// or a new one (everything granted before is gone).
	StateReconnected
	// StateLost: the session expired at the server, was presumed expired
	// because no server replied within the session timeout, or the session
	// was closed. Everything granted under it is lost.
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
