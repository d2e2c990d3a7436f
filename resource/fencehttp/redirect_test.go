package fencehttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
)

// TestHandlerHeadersAnySpelling: a handler that sets the protocol's
// headers as raw map keys, which net/http sends as they are and the
// client canonicalises, does not make its accepted write look refused.
// Before, "fencing-error: stale" got through and CheckResponse reported
// a stale token for a write whose token was recorded.
func TestHandlerHeadersAnySpelling(t *testing.T) {
	var g fence.Guard
	srv := serve(t, &g, func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["fencing-error"] = []string{"stale"}
		hd["fencing-HIGHEST"] = []string{"99"}
		hd[http.TrailerPrefix+"fencing-error"] = []string{"stale"}
		hd["X-Kept"] = []string{"yes"}
		io.WriteString(w, "stored\n")
	})
	resp, _, err := put(t, srv, "1", "v", "7")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Kept") != "yes" {
		t.Fatalf("%d %v: %v", resp.StatusCode, resp.Header, err)
	}
	for _, hd := range []http.Header{resp.Header, resp.Trailer} {
		for k := range hd {
			if strings.EqualFold(k, fencehttp.ErrorHeader) || strings.EqualFold(k, fencehttp.HighestHeader) {
				t.Errorf("the handler's %s reached the client", k)
			}
		}
	}
	if h := g.Highest("accounts/1"); h != 7 {
		t.Fatalf("highest %v", h)
	}
}

// hop is what a test server got: the token header and the body.
type hop struct{ path, token, body string }

// recording starts a loopback server on addr (127.0.0.1:0 for any port)
// that answers what redirect maps a request to (a 3xx to a URL) or 200,
// and sends every request it gets to got.
func recording(t *testing.T, addr string, got chan<- hop, redirect func(r *http.Request) (int, string)) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- hop{r.URL.Path, r.Header.Get(fencehttp.Header), string(b)}
		if code, to := redirect(r); code != 0 {
			http.Redirect(w, r, to, code)
		}
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestTransportRedirects: Transport follows a redirect to the same host
// with the token (a 307 with the body too), and sends nothing to another
// host (another port, or "localhost" for 127.0.0.1): an error matching
// ErrCrossHostRedirect. Before, every hop got the token, and a 307 or 308
// the body: the write reached a service the caller never named.
func TestTransportRedirects(t *testing.T) {
	got := make(chan hop, 10)
	other := recording(t, "127.0.0.1:0", got, func(*http.Request) (int, string) { return 0, "" })
	srv := recording(t, "127.0.0.1:0", got, func(r *http.Request) (int, string) {
		_, port, _ := net.SplitHostPort(r.Host)
		switch r.URL.Path {
		case "/same":
			return http.StatusTemporaryRedirect, "/target"
		case "/other-port":
			return http.StatusPermanentRedirect, other.URL + "/x"
		case "/other-name":
			return http.StatusTemporaryRedirect, "http://localhost:" + port + "/target"
		case "/other-found":
			return http.StatusFound, other.URL + "/x"
		}
		return 0, ""
	})
	client := &http.Client{Transport: &fencehttp.Transport{Lease: &fixedLease{tok: 42, ctx: context.Background()}}}
	post := func(path string) error {
		resp, err := client.Post(srv.URL+path, "text/plain", strings.NewReader("body"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post("/same"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []hop{{"/same", "42", "body"}, {"/target", "42", "body"}} {
		if h := <-got; h != want {
			t.Fatalf("got %+v, want %+v", h, want)
		}
	}
	for _, path := range []string{"/other-port", "/other-name", "/other-found"} {
		err := post(path)
		if !errors.Is(err, fencehttp.ErrCrossHostRedirect) {
			t.Errorf("%s: %v, want ErrCrossHostRedirect", path, err)
		}
		if h := <-got; h.path != path {
			t.Fatalf("got %+v", h)
		}
		select {
		case h := <-got:
			t.Errorf("%s: the redirect was followed: %+v", path, h)
		default:
		}
	}
}
