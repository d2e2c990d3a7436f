package fenceetcd_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/fence/fenceetcd"
	"github.com/zkrecipes/zkrecipes/fence/fencehttp"
)

// TestHTTPHandler: the fence behind fencehttp's handler on a real HTTP
// server: the holders' writes land through it with their tokens, and the
// older holder's late request gets 409 with the highest accepted, which
// the client turns back into a *fence.StaleError; its write never lands.
func TestHTTPHandler(t *testing.T) {
	e := newEnv(t)
	f := e.fence(t)
	data := e.prefix + "/data"
	put := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := fenceetcd.AddOps(r.Context(), clientv3.OpPut(data, string(body))); err != nil {
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
	if got := e.get(t, data); got != "by 7" {
		t.Fatalf("data %q, want the newer holder's", got)
	}
}
