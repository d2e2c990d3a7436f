package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// httpServe starts a real HTTP server on loopback with PUT /accounts/{id}
// fenced by f (resource "accounts/<id>"); next is the fenced handler.
func httpServe(t *testing.T, f fence.Fence, next http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("PUT /accounts/{id}", fencehttp.Handler(f, func(r *http.Request) string { return "accounts/" + r.PathValue("id") },
		next, fencehttp.WithLogger(slog.New(slog.DiscardHandler))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// httpPut sends PUT /accounts/{id} with body, the token header tok and the
// header pairs hdr; it returns the response and CheckResponse's error.
func httpPut(t *testing.T, srv *httptest.Server, id, body, tok string, hdr ...string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/accounts/"+id, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(fencehttp.Header, tok)
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

// TestHTTPHandler (fencehttp's TestSQLFence, here with SQLite): behind
// fencehttp.Handler, the handler writes through the fence's
// transaction (fencesql.TxFrom); a stale token is refused before it runs,
// and a handler answering 500 after its UPDATE leaves neither the UPDATE
// nor the token committed.
func TestHTTPHandler(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.Exec("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	db.Exec("INSERT INTO accounts VALUES ('42', 'none')")
	f, err := fencesql.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := fencesql.TxFrom(ctx); ok {
		t.Fatal("TxFrom outside a write")
	}
	srv := httpServe(t, f, func(w http.ResponseWriter, r *http.Request) {
		tx, ok := fencesql.TxFrom(r.Context())
		if !ok {
			http.Error(w, "no transaction", 500)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if _, err := tx.ExecContext(r.Context(), "UPDATE accounts SET balance = ? WHERE id = ?", string(body), r.PathValue("id")); err != nil {
			http.Error(w, "update failed", 500)
			return
		}
		if r.Header.Get("X-Answer") == "500" {
			http.Error(w, "failed after the update", 500)
		}
	})
	balance := func() string {
		var b string
		if err := db.QueryRow("SELECT balance FROM accounts WHERE id = '42'").Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, _, err := httpPut(t, srv, "42", "200", "34"); err != nil || balance() != "200" {
		t.Fatalf("34: %v, balance %q", err, balance())
	}
	if _, _, err := httpPut(t, srv, "42", "999", "33"); !errors.Is(err, fence.ErrStale) || balance() != "200" {
		t.Fatalf("33: %v, balance %q", err, balance())
	}
	resp, _, err := httpPut(t, srv, "42", "500", "40", "X-Answer", "500")
	if resp.StatusCode != 500 || err != nil || balance() != "200" {
		t.Fatalf("a 500 after the update: %d %v, balance %q", resp.StatusCode, err, balance())
	}
	if h, err := f.Highest(ctx, "accounts/42"); h != 34 || err != nil {
		t.Fatalf("highest %v %v", h, err)
	}
}
