// Package nemesis is a randomized fault-injection suite for the lock
// recipes of this module and its backends, in the style of Jepsen: one
// engine over the backend-neutral contract. A Target is one backend (its
// servers, its clients, its own faults and registers, what it must leave
// clean): ZooKeeperTarget here, etcd, PostgreSQL and Redis from their
// modules. A workload of clients, each behind its own serverkit.FaultProxy,
// repeatedly takes a grant of a recipe (a mutex, a read-write lock, a
// semaphore, a leadership; LockRecipe and LeaderRecipe on any target) and
// writes (token, client, op) to fenced registers (an in-process
// fence.Guard, the target's own, e.g. a fencezk.Register znode, and, when
// Config.SQL is set, a SQL row behind fencesql.Do), while a nemesis injects
// faults at random: the generic client faults (connections cut,
// blackholed, slowed, a holder paused past the session timeout) and the
// target's (for ZooKeeper: servers killed, stopped, paused and restarted,
// the current leader among them, sessions expired on demand, the recipe's
// directory deleted under live participants). Everything is drawn from one
// seed, so a run's schedule can be replayed (timing still varies).
//
// Every invocation and response is recorded in a History, which Check
// verifies after the run:
//
//   - each register's history is linearizable (porcupine), for a register
//     whose writes succeed only with a token at least as high as the last
//     accepted one;
//   - no accepted write carried a token lower than the one it overwrote, and
//     no two accepted writes overwrote the same state (no lost update);
//   - at every sample point (each grant, each accepted write, a probe in
//     every hold) the set of lease contexts that were live is one the recipe
//     allows: one holder for a mutex, a leader or a writer; no reader with a
//     writer; at most N semaphore holders. Lease contexts are read with
//     ctx.Err(), so a sample is exact, not a timestamp comparison;
//   - a lease whose node or key a third party removed (a revocation: its
//     session expired on demand, its directory deleted) may still be live in a sample until
//     its holder hears of it (or releases it, not knowing); such an
//     overlap is counted as "excused" up to the session timeout plus 1 s
//     after the revocation, by which the lease must have ended, or it is a
//     violation;
//   - after the faults heal, some client is granted within the session
//     timeout plus 1 s;
//   - every exclusive lease whose context ended before its holder gave it
//     up ended before the next grant to another client (Margins: the two
//     numbers of the backend, observed), unless a revocation excuses it.
//
// RunTarget adds the checks that need the servers: nothing left behind
// once every client closed (Target.Leftovers; ZooKeeper: no znode under the
// recipe's directory, the servers' watch count back to its baseline), and
// no goroutine left behind (goleak).
package nemesis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// Role is what a grant allows its holder.
type Role string

// Roles of the recipes' grants.
const (
	RoleHolder Role = "holder" // mutex
	RoleWriter Role = "writer" // read-write lock, write side
	RoleReader Role = "reader" // read-write lock, read side
	RolePermit Role = "permit" // semaphore
	RoleLeader Role = "leader" // election
)

// Grant is one grant as the workload saw it. Times are since the start of
// the run.
type Grant struct {
	ID      int
	Client  int
	Role    Role
	Token   fence.Token
	Asked   time.Duration // Acquire (or the campaign) was called
	Granted time.Duration // the workload got the grant
	// Ended is when the lease ended: the holder gave it up (just before
	// Release), or its context was seen done (context.AfterFunc). -1 if it
	// never ended during the run.
	Ended time.Duration
	Cause string // context.Cause of the lease's context, "" if still live
	// Lost says the lease's context ended before its holder gave it up
	// (Ended is then when it was seen done): the leases Margins measures.
	Lost bool `json:",omitempty"`
}

// OpKind is the kind of a history entry.
type OpKind string

// Kinds of history entries.
const (
	OpGrant OpKind = "grant" // a grant was registered (sample)
	OpWrite OpKind = "write" // a write to a register
	OpProbe OpKind = "probe" // a sample taken during a hold
	// OpAcquire is an attempt to be granted that failed (Err says why; a
	// timed-out Acquire ends with a context deadline error). Grant is -1.
	OpAcquire OpKind = "acquire-failed"
)

// Outcome is the result of a register write.
type Outcome string

// Outcomes of a register write.
const (
	Accepted Outcome = "accepted" // applied
	Stale    Outcome = "stale"    // refused: a higher token was accepted before
	Unknown  Outcome = "unknown"  // the connection failed after the write was sent
	Failed   Outcome = "failed"   // not applied (failed before anything was sent, or refused otherwise)
)

// State is a register's content: the token and value of the last accepted
// write.
type State struct {
	Token fence.Token `json:"token"`
	Value string      `json:"value"`
}

// Op is one entry of a history.
type Op struct {
	Kind     OpKind
	Client   int
	Grant    int
	Token    fence.Token
	Register string        // for writes: RegGuard, RegZnode or RegSQL
	Value    string        // for writes: the value written (unique)
	Outcome  Outcome       // for writes
	Prev     State         // for accepted writes: the state overwritten
	Seq      int64         // for accepted writes: order of application (guard, sql: a counter; znode: the data version), 0 if unknown
	Call     time.Duration // invocation
	Return   time.Duration // response (for Unknown: when the client gave up)
	// Live lists the grants whose lease context was live at the sample
	// (taken at the grant, inside an accepted guard write or a SQL write's
	// transaction, right after an accepted znode write, or during a hold).
	Live []int  `json:",omitempty"`
	Err  string `json:",omitempty"`
}

// Fault is one fault the nemesis injected.
type Fault struct {
	Kind   string
	Target string        // "server 1", "client 3", the directory
	Client int           // the client, for client faults; -1 otherwise
	Start  time.Duration // the fault began
	End    time.Duration // it was undone (equal to Start for instant faults)
	Err    string        `json:",omitempty"`
	// Revokes says the fault may have revoked leases behind their owners'
	// backs (a session expired on demand, the directory deleted), so that
	// an owner can believe it holds for a while after another client was
	// granted; Certain says it certainly did (it completed without error).
	Revokes, Certain bool
	// Below, for a certain revocation, orders it among the grants: every
	// grant of the targeted leases (Client's alone when Client >= 0) with a
	// token below it was removed. ZooKeeper: the zxid of the transaction
	// that did it (the closeSession, the directory's deletion, or the
	// first re-creation after it), as a grant's token is its node's czxid.
	// Zero when unknown. (HistoryFormat /1 called it Zxid.)
	Below fence.Token `json:",omitempty"`
}

// HistoryFormat names the JSON layout of a History that WriteJSON writes
// and ReadHistory accepts. It changes with any change of a field's name or
// meaning, so that a file from another version is refused rather than
// misread.
//
// /2 (issue 22) renamed Fault.Zxid to Below and added History.Backend and
// Grant.Lost; ReadHistory still reads /1, with Zxid as Below (its grants
// do not say which leases were lost, so its Margins are empty).
const HistoryFormat = "zkrecipes-nemesis-history/2"

// historyV1 is the layout of format /1: Faults with Zxid.
const historyV1 = "zkrecipes-nemesis-history/1"

// History is everything a run recorded.
type History struct {
	// Format is HistoryFormat in a history written by WriteJSON (Run sets
	// it too).
	Format string
	// Backend is the Target's Name ("zk", "etcd", ...); "" in a history
	// of format /1 (ZooKeeper's).
	Backend        string `json:",omitempty"`
	Recipe         string
	Seed           uint64
	Clients        int
	SessionTimeout time.Duration
	Grants         []Grant
	Ops            []Op
	Faults         []Fault
	// Healed is when every fault was undone and every server served again;
	// FirstGrantAfterHeal the first grant made after it (-1: none).
	Healed              time.Duration
	FirstGrantAfterHeal time.Duration
	End                 time.Duration
	// Diagnosis, when no client was granted after the heal, is what each
	// server held then: its mode and zxid, the recipe's directory as it
	// alone sees it, its sessions with ephemeral nodes.
	Diagnosis []string `json:",omitempty"`
}

// WriteJSON writes h as indented JSON, with Format set to HistoryFormat.
func (h *History) WriteJSON(w io.Writer) error {
	c := *h
	c.Format = HistoryFormat
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&c)
}

// ErrBadHistory is matched (errors.Is) by the error ReadHistory returns for
// input that is not one whole history of this version: empty, not JSON,
// truncated, followed by more data, of another Format (or none), with a
// field this version does not know, or inconsistent (no recipe, no client,
// a client, grant or time out of range, times out of order, an op that
// does not match its grant, a first grant after the heal that no grant
// shows). The message says which.
var ErrBadHistory = errors.New("nemesis: bad history")

// ReadHistory reads a history written by WriteJSON. It reads r to its end;
// any error matches ErrBadHistory, except a failure to read r, which is
// returned as it is.
func ReadHistory(r io.Reader) (*History, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrBadHistory)
	}
	if what := notAnObject(b); what != "" {
		return nil, fmt.Errorf("%w: the input is %s, not a history (a history is one JSON object, as WriteJSON writes it)", ErrBadHistory, what)
	}
	var head struct{ Format string }
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadHistory, jsonProblem(b, err))
	}
	switch head.Format {
	case HistoryFormat:
	case historyV1:
		return readV1(b)
	case "":
		return nil, fmt.Errorf("%w: no Format field (a history written before histories were versioned, or not a nemesis history); this version reads %q", ErrBadHistory, HistoryFormat)
	default:
		return nil, fmt.Errorf("%w: format %q, this version reads %q", ErrBadHistory, head.Format, HistoryFormat)
	}
	var h History
	if err := decodeStrict(b, &h); err != nil {
		return nil, err
	}
	return checked(&h)
}

// readV1 reads a history of format /1: its faults' Zxid becomes Below.
func readV1(b []byte) (*History, error) {
	type faultV1 struct {
		Fault
		Zxid fence.Token
	}
	var v1 struct {
		History
		Faults []faultV1 // hides History.Faults
	}
	if err := decodeStrict(b, &v1); err != nil {
		return nil, err
	}
	h := v1.History
	h.Format, h.Faults = HistoryFormat, nil
	for _, f := range v1.Faults {
		f.Fault.Below = f.Zxid
		h.Faults = append(h.Faults, f.Fault)
	}
	return checked(&h)
}

// decodeStrict decodes b into v, refusing unknown fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", ErrBadHistory, jsonProblem(b, err))
	}
	return nil
}

// checked returns h if it is consistent (validate).
func checked(h *History) (*History, error) {
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadHistory, err)
	}
	return h, nil
}

// notAnObject names what JSON value b holds when it is valid JSON but not
// an object ("a JSON array", ...), or is "" (an object, or not JSON at all,
// which the decoder then explains).
func notAnObject(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	switch v.(type) {
	case map[string]any:
		return ""
	case []any:
		return "a JSON array"
	case string:
		return "a JSON string"
	case float64:
		return "a JSON number"
	case bool:
		return "a JSON boolean"
	}
	return "JSON null"
}

// jsonProblem says what is wrong with b, which json refused with err.
func jsonProblem(b []byte, err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &syn) && syn.Offset >= int64(len(bytes.TrimRight(b, " \t\r\n"))):
		return fmt.Sprintf("truncated: the JSON ends early, after %d bytes", len(b))
	case errors.As(err, &syn):
		return fmt.Sprintf("not JSON at byte %d: %v", syn.Offset, err)
	}
	return err.Error()
}

// String formats o for reports: its interval, client, grant, token and
// what it did.
func (o Op) String() string {
	switch o.Kind {
	case OpWrite:
		s := fmt.Sprintf("[%v,%v] client %d grant %d token %s write %s=%q: %s", o.Call, o.Return, o.Client, o.Grant, TokenText(o.Token), o.Register, o.Value, o.Outcome)
		if o.Outcome == Accepted {
			s += fmt.Sprintf(" over (%s,%q)", TokenText(o.Prev.Token), o.Prev.Value)
		}
		if len(o.Live) > 0 {
			s += fmt.Sprintf(" live %v", o.Live)
		}
		return s
	case OpAcquire:
		return fmt.Sprintf("[%v,%v] client %d %s: %s", o.Call, o.Return, o.Client, o.Kind, o.Err)
	default:
		return fmt.Sprintf("[%v] client %d grant %d token %s %s live %v", o.Call, o.Client, o.Grant, TokenText(o.Token), o.Kind, o.Live)
	}
}

// ShortToken writes a token, a zxid, as epoch:counter (4294967313 is
// 1:17): what tells two tokens apart at a glance, in their order. A token
// of epoch 0 (not a zxid of a running ensemble) is written as its number.
// The page's timeline and porcupine's views label tokens so.
func ShortToken(t fence.Token) string {
	if t>>32 == 0 {
		return strconv.FormatUint(uint64(t), 10)
	}
	return fmt.Sprintf("%d:%d", uint64(t)>>32, uint64(t)&0xffffffff)
}

// TokenText writes a token for the reports: its number, as in the history,
// and its ShortToken as the timeline labels it, "4294967313 (1:17)"; a
// token of epoch 0 as its number alone.
func TokenText(t fence.Token) string {
	if t>>32 == 0 {
		return ShortToken(t)
	}
	return fmt.Sprintf("%d (%s)", uint64(t), ShortToken(t))
}
