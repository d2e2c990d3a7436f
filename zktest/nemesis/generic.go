package nemesis

// FaultPauseClient freezes a holder past the session timeout T: its proxy
// blackholed for 1.2 to 2 T and its hold stalled for the same time, after
// which it writes without looking at its lease's context (a GC or VM pause
// as the fenced resource sees it).
const FaultPauseClient = "pause-client"

// GenericFaults are the client faults the engine injects on every Target
// through each client's FaultProxy.
var GenericFaults = []string{FaultCut, FaultBlackhole, FaultLatency, FaultPauseClient}

// LockRecipe is any Client.Lock under the nemesis: Acquire, hold, Release.
func LockRecipe() Recipe {
	return Recipe{Name: "mutex", Allowed: AtMost(1), Fenced: always} // stub: Open comes with the engine
}

// LeaderRecipe is leader.Run over Client.Lock: the leader function is the
// hold.
func LeaderRecipe() Recipe {
	return Recipe{Name: "leader", Allowed: AtMost(1), Fenced: always} // stub: Open comes with the engine
}
