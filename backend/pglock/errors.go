package pglock

import "errors"

// Sentinel errors of this package. Errors about leases and waiting use the
// recipe package's values (recipe.ErrLocked, recipe.ErrLeaseLost,
// recipe.ErrSessionClosed, ...), as every backend does.
var (
	// ErrBadURL is matched by the error of Connect when the URL (or
	// keyword=value connection string) can't be parsed.
	ErrBadURL = errors.New("pglock: bad PostgreSQL URL")

	// ErrTokenTable is matched by Connect's error when the token table does
	// not exist and the role can't create it, and by New's (WithLockDelay)
	// and Holder's when a table made by an older pglock lacks their columns
	// and the role can't add them. The error names the statements an
	// administrator can run instead.
	ErrTokenTable = errors.New("pglock: token table missing and not creatable")

	// ErrPooler is matched when a connection does not lead to one server
	// session of its own: the backend process id announced at connect time
	// is not the one that runs our statements, which is what a pooler such
	// as PgBouncer looks like. Session-level advisory locks are unsafe
	// through a pooler in transaction mode (the lock stays on a server
	// connection other clients then use), so nothing is locked then.
	ErrPooler = errors.New("pglock: connection goes through a pooler, not to a server session of its own")

	// ErrConnLimit is matched when a lock connection can't be had within
	// the bounds: TryAcquire while all WithMaxConns connections of its
	// Session are in use (it does not wait), or the server refusing a
	// connection for having too many (SQLSTATE 53300).
	ErrConnLimit = errors.New("pglock: connection limit reached")

	// ErrOldServer is matched by Connect's error when the server does not
	// know one of the session parameters this package sets (SQLSTATE 42704
	// for idle_session_timeout and the others of docs/backends.md): a
	// server older than PostgreSQL 14, which pglock needs.
	ErrOldServer = errors.New("pglock: the server is older than PostgreSQL 14, which pglock needs")

	// ErrHolderUnknown is matched by Holder's error when the lock is held
	// but not by a grant whose record it can confirm: a grant whose token
	// bump has not committed yet (a moment after every grant), a session
	// of a pglock older than Holder, or a client outside pglock holding
	// the lock's key. It names nobody, as the server does not say who.
	ErrHolderUnknown = errors.New("pglock: the lock is held, by a grant whose record is not confirmed")

	// ErrBadHolderRecord is matched by Holder's error when the holder's
	// record in the token row is malformed (an identity WithIdentity would
	// refuse, a token or time that is not one): written by another client
	// of the table. ObserveHolder logs it and reads again.
	ErrBadHolderRecord = errors.New("pglock: malformed holder record in the token row")
)
