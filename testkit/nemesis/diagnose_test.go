package nemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/internal/zkside"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

var errStuck = errors.New("stuck behind a blocker")

// stuck is a recipe nobody is ever granted: each client puts an ephemeral
// node in the directory and reports every attempt as failed.
func stuck() Recipe {
	return Recipe{Name: "stuck", Allowed: AtMost(1), Fenced: always,
		Open: func(c Client, dir string) (Participant, error) {
			s, err := zkSession(c)
			if err != nil {
				return nil, err
			}
			return stuckParticipant{s: s, dir: zkside.SessionOf(s).Chroot() + dir}, nil
		}}
}

type stuckParticipant struct {
	s   *zookeeper.Session
	dir string
}

func (p stuckParticipant) Run(ctx context.Context, _ *rand.Rand, _ func(Held), failed func(time.Time, error)) error {
	conn := p.s.Conn()
	_, _ = conn.Create(p.dir, nil, 0, zk.WorldACL(zk.PermAll))
	if _, err := conn.Create(p.dir+"/blocker-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		failed(time.Now(), err)
	}
	for ctx.Err() == nil {
		asked := time.Now()
		pause(ctx, 100*time.Millisecond)
		failed(asked, errStuck)
	}
	return context.Cause(ctx)
}

// TestRunDiagnosesAStall: a run in which nobody is granted records every
// failed attempt in the history, fails its recovery check, and describes
// what each server holds: the directory's nodes with their owners, and
// the clients' sessions.
func TestRunDiagnosesAStall(t *testing.T) {
	cl := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cl, stuck(), Config{Clients: 2, Seed: 1, Duration: time.Second, Faults: []string{FaultLatency}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	h := res.History
	if h.FirstGrantAfterHeal >= 0 || !strings.Contains(strings.Join(res.Report.Violations, "\n"), "no grant within") {
		t.Errorf("no recovery violation: %q", res.Report.Violations)
	}
	failed := map[int]int{}
	for _, o := range h.Ops {
		if o.Kind == OpAcquire && o.Err == errStuck.Error() && o.Grant == -1 && o.Return >= o.Call {
			failed[o.Client]++
		}
	}
	if failed[0] < 5 || failed[1] < 5 {
		t.Errorf("failed attempts recorded per client: %v", failed)
	}
	d := strings.Join(h.Diagnosis, "\n")
	t.Logf("diagnosis:\n%s", d)
	if len(h.Diagnosis) < 3 || !strings.HasPrefix(h.Diagnosis[0], "client sessions: client 0 0x") {
		t.Fatalf("diagnosis: %q", h.Diagnosis)
	}
	if !strings.Contains(h.Diagnosis[1], "server 0 ") || !strings.Contains(h.Diagnosis[1], "mode standalone") ||
		strings.Count(h.Diagnosis[1], "blocker-") != 2 || strings.Contains(h.Diagnosis[1], "owner=0x0,") {
		t.Errorf("server 0's view: %q", h.Diagnosis[1])
	}
	for i := range 2 {
		id := strings.Fields(strings.Split(h.Diagnosis[0], ",")[i])
		if owner := "owner=" + id[len(id)-1]; !strings.Contains(h.Diagnosis[1], owner) {
			t.Errorf("no node with %s in %q", owner, h.Diagnosis[1])
		}
	}
	if s := (Op{Kind: OpAcquire, Client: 1, Call: time.Second, Return: 2 * time.Second, Err: "x"}).String(); s != "[1s,2s] client 1 acquire-failed: x" {
		t.Errorf("String: %q", s)
	}
}
