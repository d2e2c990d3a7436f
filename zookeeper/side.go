package zookeeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
)

// What the module's other packages need of the engine and its users do
// not goes through internal/zkside, which cannot import this package: it
// is registered here.
func init() {
	zkside.Register(zkside.Hooks{
		Session: func(s any) zkside.Session { return (*sessionSide)(s.(*Session)) },
		Queue: func(q any) zkside.Queue {
			if q, _ := q.(*Queue); q != nil {
				return (*queueSide)(q)
			}
			return nil
		},
		ValidatePath:           validatePath,
		ValidateSequentialPath: validateSequentialPath,
		NodeNames: func(ps []Participant) []NodeName {
			names := make([]NodeName, len(ps))
			for i, p := range ps {
				names[i] = participantName(p)
			}
			return names
		},
		NodeKind: grammarKind,
	})
}

// sessionSide is a Session's zkside.Session.
type sessionSide Session

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

// queueSide is a Queue's zkside.Queue.
type queueSide Queue

func (q *queueSide) CheckNodeData(data []byte) error { return (*Queue)(q).checkNodeData(data) }
func (q *queueSide) Heads() zkside.Observed          { return (*Queue)(q).heads() }
func (q *queueSide) SetLockDelay(d time.Duration)    { (*Queue)(q).setLockDelay(d) }
