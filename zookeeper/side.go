package zookeeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
)

// What the module's other packages need of the engine beyond the exported
// API, typed (internal/zkside's package doc says what and why): a Session
// embeds a sessionDoor, a Queue a queueDoor, which zkside.SessionOf and
// zkside.QueueOf open. The aliases keep the embedded fields unexported.
type (
	sessionDoor = zkside.SessionDoor
	queueDoor   = zkside.QueueDoor[Head]
)

// sessionSide is a Session's zkside.Session.
type sessionSide Session

var _ zkside.Session = (*sessionSide)(nil)

func (s *sessionSide) Chroot() string       { return s.chroot }
func (s *sessionSide) Logger() *slog.Logger { return s.cfg.logger }
func (s *sessionSide) PendingCleanup() int  { return s.cleaner.pending() }
func (s *sessionSide) ACL() []zk.ACL        { return s.cfg.acl }

func (s *sessionSide) ACLRule(existing, acl []zk.ACL, guard, need int32) string {
	return checkNodeACL(existing, acl, s.cfg.auth, guard, need)
}

func (s *sessionSide) EnsureDir(ctx context.Context, dir string, acl []zk.ACL) (bool, error) {
	return (*Session)(s).ensureDir(ctx, dir, acl)
}

func (s *sessionSide) CheckRequest(op any) error {
	return s.limit.checkRequest(false, []any{op})
}

func (s *sessionSide) CheckMulti(ops ...any) error { return s.limit.checkRequest(true, ops) }

func (*sessionSide) ValidatePath(p string) error           { return validatePath(p) }
func (*sessionSide) ValidateSequentialPath(p string) error { return validateSequentialPath(p) }

// queueSide is a Queue's zkside.Queue.
type queueSide Queue

var _ zkside.Queue[Head] = (*queueSide)(nil)

func (q *queueSide) Heads() zkside.Observed[Head] { return (*Queue)(q).heads() }
func (q *queueSide) SetLockDelay(d time.Duration) { (*Queue)(q).setLockDelay(d) }
