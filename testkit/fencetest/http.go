package fencetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
)

// RunHTTP puts f behind fencehttp's handler on a real HTTP server whose
// handler adds (through add, into the batch of f's Admit) a write of the
// request body to the data that get reads. The holders' writes land with
// their tokens, and the older holder's late request gets 409 with the
// highest accepted, which the client turns back into a *fence.StaleError;
// its write never lands.
func RunHTTP(t *testing.T, f fence.Fence, add func(ctx context.Context, body string) error, get func() string) {
	t.Helper()
	put := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := add(r.Context(), string(body)); err != nil {
			http.Error(w, "not fenced", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(fencehttp.Handler(f, func(*http.Request) string { return "report" }, put))
	defer srv.Close()
	send := func(tok fence.Token, body string) error {
		req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader(body))
		fencehttp.SetToken(req, tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return fencehttp.CheckResponse(resp)
	}
	for _, c := range []struct {
		tok  fence.Token
		body string
	}{{5, "by 5"}, {7, "by 7"}} {
		if err := send(c.tok, c.body); err != nil {
			t.Fatalf("token %v: %v", c.tok, err)
		}
	}
	err := send(5, "late, by 5")
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Highest != 7 {
		t.Fatalf("the older holder's request: %v, want a StaleError with highest 7", err)
	}
	if got := get(); got != "by 7" {
		t.Fatalf("data %q, want the newer holder's", got)
	}
}
