package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// sessionLock is Session.mu: the one lock of the Session's parts (the
// state machine, the lease registry, the watch registry, the cleaner's
// queue), the closed flag, and what is logged once it is released
// (unlock): state transitions, and lost leases (grant.Core reports a loss
// as the lease ends, which is under it). So a slow (or re-entrant) log
// handler never runs under the mutex, nor stalls go-zookeeper's event
// dispatch for longer than it takes to log. Parts keep a pointer to it.
type sessionLock struct {
	sync.Mutex
	// closed is set, under the lock, as Close begins: from then on the
	// parts start nothing (no lease activated, no delete queued).
	closed      bool
	log         *slog.Logger
	transitions []StateChange
	held        []heldRecord
	// leaseLog is where leases report their loss (grant.Reporter): a
	// logger whose records are held until unlock.
	leaseLog *slog.Logger
	// sends are the writes queued under the lock (afterUnlock), made
	// once it is released: no socket write happens under it (C19).
	sends []func()
}

// afterUnlock queues f, which writes to the connection, to run once the
// lock is released, on the goroutine that releases it. Called under the
// lock.
func (l *sessionLock) afterUnlock(f func()) { l.sends = append(l.sends, f) }

// Unlock releases the lock, then runs what afterUnlock queued.
func (l *sessionLock) Unlock() {
	sends := l.sends
	l.sends = nil
	l.Mutex.Unlock()
	for _, f := range sends {
		f()
	}
}

func newSessionLock(log *slog.Logger) *sessionLock {
	l := &sessionLock{log: log}
	l.leaseLog = slog.New(heldLog{log.Handler(), &l.held})
	return l
}

// heldLog is the handler of sessionLock.leaseLog: it keeps records made
// under the lock (recs is under it) for unlock to hand to h.
type heldLog struct {
	h    slog.Handler
	recs *[]heldRecord
}

// heldRecord is a record kept by heldLog, and its handler.
type heldRecord struct {
	h slog.Handler
	r slog.Record
}

func (l heldLog) Enabled(ctx context.Context, lvl slog.Level) bool { return l.h.Enabled(ctx, lvl) }

func (l heldLog) Handle(_ context.Context, r slog.Record) error {
	*l.recs = append(*l.recs, heldRecord{l.h, r.Clone()})
	return nil
}

func (l heldLog) WithAttrs(as []slog.Attr) slog.Handler {
	return heldLog{l.h.WithAttrs(as), l.recs}
}

func (l heldLog) WithGroup(name string) slog.Handler { return heldLog{l.h.WithGroup(name), l.recs} }

// unlock releases the lock and then logs what was recorded meanwhile: the
// transitions, then the lost leases. The first CONNECTED and the LOST of
// Close are not logged as transitions: Connect logs "session connected",
// Close "session closed".
func (l *sessionLock) unlock() {
	q, recs, closed := l.transitions, l.held, l.closed
	l.transitions, l.held = nil, nil
	l.Unlock()
	for _, ch := range q {
		if ch.State == recipe.StateConnected || (ch.State == recipe.StateLost && errors.Is(ch.Cause, recipe.ErrSessionClosed)) {
			continue
		}
		lvl := slog.LevelInfo
		if (ch.State == recipe.StateSuspended || ch.State == recipe.StateLost) && !closed {
			lvl = slog.LevelWarn
		}
		l.log.Log(context.Background(), lvl, "connection state", "state", ch.State.String(),
			"session", fmt.Sprintf("0x%x", ch.SessionID), "cause", ch.Cause)
	}
	for _, r := range recs {
		_ = r.h.Handle(context.Background(), r.r)
	}
}

type zkLogger struct{ l *slog.Logger }

// Printf logs a line of go-zookeeper's at debug level, except its failures
// to re-register watches or credentials on a new connection, at error
// level: watches, and with them the wakeups of waiters and (under
// TolerateSuspension) a holder's notice of its node's deletion, can be lost
// (see WithMaxPacket and docs/zookeeper-client.md#assumptions-about-go-zookeeper, 12).
func (z zkLogger) Printf(format string, args ...any) {
	lvl := slog.LevelDebug
	if strings.HasPrefix(format, "Failed to set previous watches") || strings.HasPrefix(format, "error in resending auth creds") {
		lvl = slog.LevelError
	}
	z.l.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "source", "go-zookeeper")
}
