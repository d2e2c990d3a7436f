package memlock

// mutation deliberately breaks one aspect of the backend, to show that the
// conformance suite notices (TestSuiteCatchesBrokenBackends). It is
// unexported on purpose: only this package's tests build a mutant.
type mutation string

const (
	correct          mutation = ""
	sameToken        mutation = "same-token"         // tokens do not grow
	instantExpiry    mutation = "instant-expiry"     // a crash frees the lock at once
	neverExpire      mutation = "never-expire"       // sessions never expire
	releaseAnyHolder mutation = "release-any-holder" // Release removes whoever holds the lock, unchecked
	noWatchdog       mutation = "no-watchdog"        // a cut-off client keeps its leases
	leakCancelled    mutation = "leak-cancelled"     // a cancelled waiter's entry stays
	ignoresContext   mutation = "ignores-context"    // Acquire waits on, whatever its context says
	tryIgnoresHolder mutation = "try-ignores-holder" // TryAcquire grants even when held
	everyEndClean    mutation = "every-end-clean"    // no end starts a lock-delay
	abandonEndsDelay mutation = "abandon-ends-delay" // a waiter giving up ends the lock-delay
)
