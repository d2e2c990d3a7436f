package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// What happens under Session.mu is logged after it is released
// (Session.unlock): a slow (or re-entrant) log handler never runs under
// the mutex, nor stalls go-zookeeper's event dispatch for longer than it
// takes to log. Two things are logged so: state transitions (connState's
// logq) and lost leases (heldLog: grant.Core reports a loss as the lease
// ends, which is under Session.mu).

// heldLog is the handler of Session.leaseLog: it keeps records made under
// Session.mu (recs is under it) for Session.unlock to hand to h.
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

// unlock releases s.mu and then logs what was recorded meanwhile: the
// transitions, then the lost leases. The first CONNECTED and the LOST of
// Close are not logged as transitions: Connect logs "session connected",
// Close "session closed".
func (s *Session) unlock() {
	q, recs, closed := s.conns.logq, s.heldRecs, s.closed
	s.conns.logq, s.heldRecs = nil, nil
	s.mu.Unlock()
	for _, ch := range q {
		if ch.State == recipe.StateConnected || (ch.State == recipe.StateLost && errors.Is(ch.Cause, recipe.ErrSessionClosed)) {
			continue
		}
		lvl := slog.LevelInfo
		if (ch.State == recipe.StateSuspended || ch.State == recipe.StateLost) && !closed {
			lvl = slog.LevelWarn
		}
		s.log.Log(context.Background(), lvl, "connection state", "state", ch.State.String(),
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
// (see WithMaxPacket and docs/design.md#assumptions-about-go-zookeeper, 12).
func (z zkLogger) Printf(format string, args ...any) {
	lvl := slog.LevelDebug
	if strings.HasPrefix(format, "Failed to set previous watches") || strings.HasPrefix(format, "error in resending auth creds") {
		lvl = slog.LevelError
	}
	z.l.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "source", "go-zookeeper")
}
