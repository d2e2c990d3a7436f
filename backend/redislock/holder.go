package redislock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/internal/loop"
	"github.com/zkrecipes/zkrecipes/internal/notify"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var _ recipe.HolderObserver = (*Mutex)(nil)

// Who holds the lock, read from the server.
//
// Why a state read is one the server had, and belongs together: the holder
// script GETs the lock key and the token counter in one script, so both
// values are of one moment of the server's order. Every script that sets
// the lock key to an owner (a grant) INCRs the counter in the same script,
// and no script INCRs it otherwise (acquireScript's grant); a renewal or a
// repeated acquire of the same owner leaves it alone. So while the key
// holds owner o, the counter holds the token of o's grant: the pair read is
// the holder and its own token, never a predecessor's or successor's.
//
// "next:" and an owner is a lock handed to a waiter (a release's hand-off,
// or a grant reserved while a lock-delay runs) that has not claimed it:
// the previous holder's grant has ended (its owner's value is gone from the
// key), and the waiter has no grant yet (its INCR comes with the SET that
// claims it, and may never come: a waiter that died is skipped once the
// reservation expires). Nobody holds a grant then, so it is reported as
// not held: naming the waiter would show a grant, and a token, that does
// not exist, and naming the previous holder would show a released grant.
// A grant whose answer its caller has not had yet (lost, or still on its
// way) is the server's grant: it is shown with the token the caller will
// get when it asks again, or until its owner-checked delete.

// holderScript reads the lock key KEYS[1] and the token counter KEYS[2] in
// one atomic step and returns {1, value, counter} (nil for a missing key),
// or {0, i, the server's error} when the GET of KEYS[i] fails (a key of
// another type, an ACL refusal), or {2, i, its length} when KEYS[i] holds
// more than ARGV[1] bytes (not sent: another client's value can be huge).
// It writes nothing; EVAL and EVALSHA and GET are in the ACL line already.
var holderScript = redis.NewScript(`
local out = {1}
for i = 1, 2 do
  local r = redis.pcall('GET', KEYS[i])
  if type(r) == 'table' and r.err then
    return {0, i, r.err}
  end
  if r and #r > tonumber(ARGV[1]) then
    return {2, i, #r}
  end
  out[i + 1] = r
end
return out
`)

// handoffPrefix starts the lock key's value while the lock is handed to a
// waiter that has not claimed it.
const handoffPrefix = "next:"

// Holder reads who holds the lock now: one read-only script (EVALSHA, or
// EVAL the first time) GETs the lock key and the token counter together.
// Held with ID (the holder's WithIdentity, else its "host:pid") and the
// grant's Token; Since is always zero (the grant time is not stored). A
// lock handed to a waiter that has not claimed it is not held (see Who
// holds the lock in the package documentation).
// Errors: ctx's cause; recipe.ErrSessionClosed; a *recipe.OpError wrapping
// ErrBadData, a *PermissionError or the connection's error.
func (m *Mutex) Holder(ctx context.Context) (recipe.HolderState, error) {
	if ctx.Err() != nil {
		return recipe.HolderState{}, context.Cause(ctx)
	}
	s := m.s
	if !s.life.Enter() {
		return recipe.HolderState{}, errClosed
	}
	defer s.life.Exit()
	ctx, unbind := s.life.Bind(ctx)
	defer unbind()
	return m.readHolder(ctx)
}

// readHolder sends the holder script once, bounded by a third of the TTL.
func (m *Mutex) readHolder(ctx context.Context) (recipe.HolderState, error) {
	s := m.s
	rctx, cancel := context.WithTimeout(ctx, opTimeout(s.ttl))
	defer cancel()
	res, err := holderScript.Run(rctx, s.cli, []string{m.key, m.counter}, maxOwnerLen).Slice()
	if err != nil {
		if ended(ctx) {
			return recipe.HolderState{}, context.Cause(ctx)
		}
		if perr := s.permissionError(err, "the holder script"); perr != nil {
			err = perr
		}
		return recipe.HolderState{}, &recipe.OpError{Op: "holder", Path: m.key, Err: classify(ctx, err)}
	}
	st, err := m.holderOf(res)
	if err != nil {
		return recipe.HolderState{}, &recipe.OpError{Op: "holder", Path: m.key, Err: err}
	}
	return st, nil
}

// holderOf maps the holder script's answer to a state, or to an error for
// an answer or a value this package never writes.
func (m *Mutex) holderOf(res []any) (recipe.HolderState, error) {
	code, _, _ := answer(res)
	switch {
	case len(res) != 3 || code < 0 || code > 2:
		return recipe.HolderState{}, fmt.Errorf("unexpected answer of %d items to the holder script", len(res))
	case code == 2:
		i, _ := res[1].(int64)
		n, _ := res[2].(int64)
		return recipe.HolderState{}, fmt.Errorf("%w: %s holds %d bytes, more than an owner id or a token", ErrBadData, m.keyOf(i), n)
	case code == 0:
		i, _ := res[1].(int64)
		msg, _ := res[2].(string)
		switch {
		case aclRefusal(msg):
			return recipe.HolderState{}, &PermissionError{Right: m.s.rightOf(msg, "GET"), Err: errors.New(msg)}
		case strings.HasPrefix(msg, "WRONGTYPE"):
			return recipe.HolderState{}, fmt.Errorf("%w: %s is not a string key", ErrBadData, m.keyOf(i))
		}
		return recipe.HolderState{}, fmt.Errorf("reading %s: %s", m.keyOf(i), msg)
	}
	if res[1] == nil {
		return recipe.HolderState{}, nil // free: the counter says nothing then
	}
	v, ok := res[1].(string)
	if !ok {
		return recipe.HolderState{}, fmt.Errorf("%w: %s is not a string", ErrBadData, m.key)
	}
	if next, ok := strings.CutPrefix(v, handoffPrefix); ok {
		if _, err := idOf(next); err != nil {
			return recipe.HolderState{}, fmt.Errorf("%w: %s is handed to %v", ErrBadData, m.key, err)
		}
		return recipe.HolderState{}, nil // handed to a waiter: nobody holds a grant
	}
	id, err := idOf(v)
	if err != nil {
		return recipe.HolderState{}, fmt.Errorf("%w: %s holds %v", ErrBadData, m.key, err)
	}
	t, _ := res[2].(string)
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 {
		return recipe.HolderState{}, fmt.Errorf("%w: the lock is held but its token counter %s is not a positive integer", ErrBadData, m.counter)
	}
	return recipe.HolderState{Held: true, Holder: recipe.Holder{ID: id, Token: fence.Token(n)}}, nil
}

// keyOf names KEYS[i] of the holder script.
func (m *Mutex) keyOf(i int64) string {
	if i == 2 {
		return m.counter
	}
	return m.key
}

// maxOwnerLen bounds an owner id read back: an identity of any session
// (the default's host name is at most 255 bytes), ':', 26 random
// characters.
const maxOwnerLen = 512

// idOf returns the identity part of owner, an owner id as newOwner makes
// it, or an error saying (without quoting it) why it is not one.
func idOf(owner string) (string, error) {
	i := strings.LastIndexByte(owner, ':')
	switch {
	case len(owner) > maxOwnerLen:
		return "", fmt.Errorf("a value of %d bytes, not an owner id", len(owner))
	case i < 1 || !isRandom(owner[i+1:]) || !printable(owner[:i]):
		return "", errors.New("a value that is not an owner id")
	}
	return owner[:i], nil
}

// isRandom reports whether r is crypto/rand.Text's: 26 characters of
// base32's alphabet.
func isRandom(r string) bool {
	if len(r) != 26 {
		return false
	}
	for _, c := range []byte(r) {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// printable reports whether s is valid UTF-8 of printable characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// checkIdentity returns why WithIdentity refuses id, or nil.
func checkIdentity(id string) error {
	switch {
	case id == "" || len(id) > MaxIdentityLen:
		return fmt.Errorf("%d bytes, want 1 to %d", len(id), MaxIdentityLen)
	case !printable(id):
		return errors.New("not printable UTF-8")
	case strings.Contains(id, ":"):
		return errors.New("contains ':', the owner id's separator")
	case id+":" == handoffPrefix:
		return errors.New("reserved: the lock key of a hand-off starts with \"next:\"")
	}
	return nil
}

// defaultIdentity is the identity of a session without WithIdentity:
// "host:pid", the host name with what is not printable, or ':', as '_' (a
// host named "next" as "next_", so that no owner id starts as a hand-off
// does).
func defaultIdentity() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == ':' || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, host)
	if len(host) > 255 {
		host = strings.ToValidUTF8(host[:255], "_")
	}
	if host+":" == handoffPrefix {
		host += "_"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// ObserveHolder delivers the lock's state at once and then every change it
// reads, polling with Holder's script every WithHolderPoll interval
// (default 500 ms: a change is seen at most one interval and one read after
// it; shorter states can be missed); coalesced, consecutive states differ,
// and a held state whose token is below one read earlier is not delivered.
// A failed read (ErrBadData included) is logged at warning level and
// retried with backoff from the interval to 5 s. The channel closes when
// ctx ends or the Session closes; a reader that stops must end ctx.
func (m *Mutex) ObserveHolder(ctx context.Context) <-chan recipe.HolderState {
	out := notify.NewLatest(recipe.HolderState.Equal)
	ctx, unbind := m.s.life.Bind(ctx)
	if !m.s.life.Go(func() {
		defer unbind()
		defer out.Close()
		m.observe(ctx, out)
	}) {
		unbind()
		out.Close()
	}
	return out.C()
}

// maxObserveBackoff is the longest wait between ObserveHolder's retries of
// a failing read (or the poll interval, if longer).
const maxObserveBackoff = 5 * time.Second

// observe is ObserveHolder's goroutine: read, and until the next read
// offer the reader the newest state it does not have.
func (m *Mutex) observe(ctx context.Context, out *notify.Latest[recipe.HolderState]) {
	s := m.s
	var (
		floor fence.Token // the largest token read
		b     = loop.BackOff(s.poll, max(s.poll, maxObserveBackoff))
	)
	for {
		st, err := m.readHolder(ctx)
		if err == nil && st.Held && st.Holder.Token < floor {
			err = &recipe.OpError{Op: "holder", Path: m.key, Err: fmt.Errorf("%w: the token counter %s went back from %v to %v (reset by FLUSHALL, eviction or another client): not delivered",
				ErrBadData, m.counter, floor, st.Holder.Token)}
		}
		wait := s.poll
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("redislock: reading the lock's holder failed; retrying", "key", m.key, "err", err)
			wait = b.NextBackOff()
		default:
			b.Reset()
			if st.Held {
				floor = st.Holder.Token
			}
			out.Offer(st) // a state not taken yet is replaced: the reader gets the newest
		}
		if loop.Sleep(ctx, wait) != nil {
			return
		}
	}
}
