package fencehttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
	"github.com/zkrecipes/zkrecipes/testkit/fencetest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
)

// zktest.Main: the ZooKeeper test shares its server; it checks goroutines
// with goleak after the tests.
func TestMain(m *testing.M) { zktest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// store is the in-process resource of the tests: what the fenced handler
// writes, per account.
type store struct {
	mu sync.Mutex
	v  map[string]string
}

func (s *store) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v[k]
}

func (s *store) put(k, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v == nil {
		s.v = map[string]string{}
	}
	s.v[k] = v
}

// serve starts a real HTTP server on loopback with PUT /accounts/{id}
// fenced by f; next is the fenced handler. It is closed at the test's end.
func serve(t *testing.T, f fence.Fence, next http.HandlerFunc, opts ...fencehttp.Option) *httptest.Server {
	t.Helper()
	return serveAs(t, f, func(r *http.Request) string { return "accounts/" + r.PathValue("id") }, next, opts...)
}

// serveAs is serve with resource naming the request's resource.
func serveAs(t *testing.T, f fence.Fence, resource func(*http.Request) string, next http.HandlerFunc, opts ...fencehttp.Option) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("PUT /accounts/{id}", fencehttp.Handler(f, resource, next, append([]fencehttp.Option{fencehttp.WithLogger(quiet)}, opts...)...))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panics of TestPanicRecordsNothing
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// putter is the fenced handler of the tests: it stores the body under the
// account, or answers the status of the X-Answer header without storing.
func putter(s *store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if a := r.Header.Get("X-Answer"); a != "" {
			http.Error(w, "refused by the handler", map[string]int{"400": 400, "500": 500}[a])
			return
		}
		s.put(r.PathValue("id"), string(body))
		w.Header().Set("X-Stored", "yes")
		io.WriteString(w, "stored\n")
	}
}

// put sends PUT /accounts/{id} with body and, if tok is not empty, the
// token header; it returns the response (body read into text) and
// CheckResponse's error.
func put(t *testing.T, srv *httptest.Server, id, body, tok string, hdr ...string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/accounts/"+id, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set(fencehttp.Header, tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(text), fencehttp.CheckResponse(resp)
}

// TestStaleRefused is the 33/34 scenario over HTTP with a Guard: 34 writes,
// 33 is refused with 409, the highest accepted in a header and the body,
// and its client gets a *fence.StaleError; 34 again and 35 are accepted.
// The refusal is reported to the Guard's OnStale, once.
func TestStaleRefused(t *testing.T) {
	var g fence.Guard
	onStale, reported := fencetest.CountStale()
	g.OnStale = onStale
	var s store
	srv := serve(t, &g, putter(&s))

	resp, text, err := put(t, srv, "42", "200", "34")
	if err != nil || resp.StatusCode != 200 || text != "stored\n" || resp.Header.Get("X-Stored") != "yes" {
		t.Fatalf("34: %d %q %v", resp.StatusCode, text, err)
	}
	resp, text, err = put(t, srv, "42", "999", "33")
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Highest != 34 || se.Token != 33 {
		t.Fatalf("33: err %v, want a StaleError with Highest 34", err)
	}
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(fencehttp.HighestHeader) != "34" ||
		text != `{"error":"stale","highest":"34"}`+"\n" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("33: %d %v %q", resp.StatusCode, resp.Header, text)
	}
	if strings.Contains(se.Resource, "?") || !strings.Contains(se.Resource, "/accounts/42") {
		t.Fatalf("Resource %q", se.Resource)
	}
	if got := s.get("42"); got != "200" {
		t.Fatalf("stored %q after the stale write", got)
	}
	for _, tok := range []string{"34", "35"} {
		if _, _, err := put(t, srv, "42", "v"+tok, tok); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	if g.Highest("accounts/42") != 35 || g.Highest("accounts/7") != 0 || s.get("42") != "v35" {
		t.Fatalf("highest %v, stored %q", g.Highest("accounts/42"), s.get("42"))
	}
	// Another resource has its own mark.
	if _, _, err := put(t, srv, "7", "x", "1"); err != nil {
		t.Fatal(err)
	}
	if n := reported(); n != 1 {
		t.Fatalf("the fence reported %d stale writes, want 1", n)
	}
}

// TestBadTokens: what is not exactly one decimal token in 1..2^63-1 is
// refused with 400 before the handler runs, nothing recorded, and the
// header's value is never echoed.
func TestBadTokens(t *testing.T) {
	var g fence.Guard
	var s store
	srv := serve(t, &g, putter(&s))
	huge := strings.Repeat("9", 4000)
	cases := []struct {
		name, tok string
		extra     []string
		code      string
		want      error
	}{
		{"missing", "", nil, "no-token", fence.ErrNoToken},
		{"zero", "0", nil, "no-token", fence.ErrNoToken},
		{"negative", "-5", nil, "bad-token", fence.ErrBadToken},
		{"plus", "+5", nil, "bad-token", fence.ErrBadToken},
		{"leading zero", "05", nil, "bad-token", fence.ErrBadToken},
		{"hex", "0x10", nil, "bad-token", fence.ErrBadToken},
		{"space inside", "1 2", nil, "bad-token", fence.ErrBadToken},
		{"list", "34, 33", nil, "bad-token", fence.ErrBadToken},
		{"over 64 bits", "18446744073709551616", nil, "bad-token", fence.ErrBadToken},
		{"over MaxToken", "9223372036854775808", nil, "bad-token", fence.ErrBadToken},
		{"max uint64", "18446744073709551615", nil, "bad-token", fence.ErrBadToken},
		{"huge", huge, nil, "bad-token", fence.ErrBadToken},
		{"duplicate", "5", []string{fencehttp.Header, "5"}, "bad-token", fence.ErrBadToken},
		{"duplicate differing", "5", []string{fencehttp.Header, "3"}, "bad-token", fence.ErrBadToken},
		{"unicode digits", "٣٤", nil, "bad-token", fence.ErrBadToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, text, err := put(t, srv, "42", "x", c.tok, c.extra...)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(fencehttp.ErrorHeader) != c.code || !errors.Is(err, c.want) {
				t.Fatalf("%d %q %q %v", resp.StatusCode, resp.Header.Get(fencehttp.ErrorHeader), text, err)
			}
			if c.tok != "" && len(c.tok) > 2 && strings.Contains(text, c.tok) {
				t.Fatalf("the body echoes the token header: %q", text)
			}
		})
	}
	if g.Highest("accounts/42") != 0 || s.get("42") != "" {
		t.Fatal("a refused request wrote or recorded")
	}
	// The largest token is accepted (and then refuses every other).
	if _, _, err := put(t, srv, "42", "x", fence.MaxToken.String()); err != nil {
		t.Fatal(err)
	}
}

// TestBadResources: a resource name that fence.CheckResource refuses gets
// 400 bad-resource, the handler not called.
func TestBadResources(t *testing.T) {
	var g fence.Guard
	called := false
	names := map[string]string{"empty": "", "long": strings.Repeat("a", 201), "utf8": "a\xffb", "nul": "a\x00b"}
	mux := http.NewServeMux()
	mux.Handle("/", fencehttp.Handler(&g, func(r *http.Request) string { return names[r.URL.Query().Get("n")] },
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), fencehttp.WithLogger(quiet)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for n := range names {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/?n="+n, nil)
		fencehttp.SetToken(req, 5)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := fencehttp.CheckResponse(resp); resp.StatusCode != 400 || !errors.Is(err, fence.ErrBadResource) {
			t.Fatalf("%s: %d %v", n, resp.StatusCode, err)
		}
	}
	if called {
		t.Fatal("the handler ran for a bad resource")
	}
}

// TestHandlerErrorsRecordNothing: a handler answering 400 or 500 has its
// response sent as written, and its token is not recorded, so a lower
// token is still accepted afterwards; a 409 of its own, even with a
// forged Fencing-Highest, is not taken for a stale token.
func TestHandlerErrorsRecordNothing(t *testing.T) {
	var g fence.Guard
	var s store
	srv := serve(t, &g, putter(&s))
	for _, a := range []string{"400", "500"} {
		resp, text, err := put(t, srv, "42", "x", "50", "X-Answer", a)
		if err != nil || resp.Status[:3] != a || !strings.Contains(text, "refused by the handler") {
			t.Fatalf("%s: %d %q %v", a, resp.StatusCode, text, err)
		}
	}
	if g.Highest("accounts/42") != 0 {
		t.Fatalf("recorded %v after handler errors", g.Highest("accounts/42"))
	}
	if _, _, err := put(t, srv, "42", "x", "10"); err != nil {
		t.Fatal(err)
	}

	forger := serve(t, &g, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(fencehttp.HighestHeader, "99")
		w.Header().Set(fencehttp.ErrorHeader, "stale")
		w.WriteHeader(http.StatusConflict)
	})
	resp, _, err := put(t, forger, "1", "", "3")
	if resp.StatusCode != 409 || err != nil || resp.Header.Get(fencehttp.HighestHeader) != "" {
		t.Fatalf("the handler's own 409: %d %v %v", resp.StatusCode, resp.Header, err)
	}
}

// TestPanicRecordsNothing: a panicking handler records nothing, sends
// nothing, and the panic reaches net/http (which closes the connection).
func TestPanicRecordsNothing(t *testing.T) {
	var g fence.Guard
	srv := serve(t, &g, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "half a response")
		panic(http.ErrAbortHandler) // net/http does not log this one
	})
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/accounts/1", nil)
	fencehttp.SetToken(req, 7)
	resp, err := srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got a response %d from a panicking handler", resp.StatusCode)
	}
	if g.Highest("accounts/1") != 0 {
		t.Fatal("recorded after a panic")
	}
	// The resource is not left locked.
	if _, _, err := put(t, srv2(t, &g), "1", "", "6"); err != nil {
		t.Fatal(err)
	}
	// A bad status code panics inside the write, not once it is recorded.
	bad := serve(t, &g, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(1000) })
	req, _ = http.NewRequest(http.MethodPut, bad.URL+"/accounts/2", nil)
	fencehttp.SetToken(req, 7)
	if resp, err := bad.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got a response %d for an invalid status", resp.StatusCode)
	}
	if g.Highest("accounts/2") != 0 {
		t.Fatal("recorded after an invalid status")
	}
}

// srv2 is a second server over g whose handler writes nothing.
func srv2(t *testing.T, g *fence.Guard) *httptest.Server {
	return serve(t, g, func(http.ResponseWriter, *http.Request) {})
}

// TestLimits: a request body over the limit gets 413 before the fence; a
// response over the limit fails the write (500, nothing recorded).
func TestLimits(t *testing.T) {
	var g fence.Guard
	var s store
	srv := serve(t, &g, putter(&s), fencehttp.WithMaxRequest(10))
	resp, _, err := put(t, srv, "1", strings.Repeat("x", 11), "5")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !errors.Is(err, fencehttp.ErrRefused) || g.Highest("accounts/1") != 0 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if _, _, err := put(t, srv, "1", strings.Repeat("x", 10), "5"); err != nil || s.get("1") != "xxxxxxxxxx" {
		t.Fatal(err)
	}

	big := serve(t, &g, func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 8))
		if _, err := w.Write(make([]byte, 8)); err == nil {
			t.Error("a write over the limit succeeded")
		}
	}, fencehttp.WithMaxResponse(10))
	resp, text, err := put(t, big, "2", "", "5")
	if resp.StatusCode != 500 || !errors.Is(err, fencehttp.ErrRefused) || g.Highest("accounts/2") != 0 || strings.Contains(text, "limit") {
		t.Fatalf("%d %q %v", resp.StatusCode, text, err)
	}
}

// TestRequestContext: a request whose client gave up while it waited for
// the Guard's lock behind another one on the same resource gets 503 and
// records nothing: its handler never runs.
func TestRequestContext(t *testing.T) {
	g := &fence.Guard{}
	blocked, release := make(chan struct{}), make(chan struct{})
	waiting := make(chan context.Context, 1) // the second request's, on the server
	logged := make(chan string, 100)
	var ran sync.Map
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Store(r.Header.Get(fencehttp.Header), true)
		if r.Header.Get(fencehttp.Header) == "9" {
			close(blocked)
			<-release
		}
	})
	resource := func(r *http.Request) string {
		if r.Header.Get(fencehttp.Header) == "10" {
			waiting <- r.Context()
		}
		return "accounts/1"
	}
	srv := httptest.NewServer(fencehttp.Handler(g, resource, next, fencehttp.WithLogger(slog.New(chanHandler(logged)))))
	defer srv.Close()
	send := func(ctx context.Context, tok fence.Token, res chan<- error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, nil)
		fencehttp.SetToken(req, tok)
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			err = fencehttp.CheckResponse(resp)
		}
		res <- err
	}
	first, second := make(chan error, 1), make(chan error, 1)
	go send(context.Background(), 9, first) // holds the Guard's lock on accounts/1
	<-blocked
	ctx, cancel := context.WithCancel(context.Background())
	go send(ctx, 10, second)
	serverCtx := <-waiting
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	<-serverCtx.Done() // the server saw the client go
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for found := false; !found; {
		select {
		case msg := <-logged:
			found = strings.Contains(msg, "ended before the write")
		case <-timeout:
			t.Fatal("the abandoned request was not answered")
		}
	}
	if _, ok := ran.Load("10"); ok || g.Highest("accounts/1") != 9 {
		t.Fatalf("the abandoned request ran (%v) or recorded: highest %v", ok, g.Highest("accounts/1"))
	}
}

// chanHandler is a slog.Handler sending every message on ch.
type chanHandler chan string

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }
