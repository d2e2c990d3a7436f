package fencehttp_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/go-zookeeper/zk"
	_ "modernc.org/sqlite"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
	"github.com/zkrecipes/zkrecipes/resource/fencezk"
	"github.com/zkrecipes/zkrecipes/testkit/rtest"
	"github.com/zkrecipes/zkrecipes/testkit/zktest"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// TestSQLFence: over fencesql, the handler writes through the fence's
// transaction (fencesql.TxFrom); a stale token is refused before it runs,
// and a handler answering 500 after its UPDATE leaves neither the UPDATE
// nor the token committed.
func TestSQLFence(t *testing.T) {
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
	srv := serve(t, f, func(w http.ResponseWriter, r *http.Request) {
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
	if _, _, err := put(t, srv, "42", "200", "34"); err != nil || balance() != "200" {
		t.Fatalf("34: %v, balance %q", err, balance())
	}
	if _, _, err := put(t, srv, "42", "999", "33"); !errors.Is(err, fence.ErrStale) || balance() != "200" {
		t.Fatalf("33: %v, balance %q", err, balance())
	}
	resp, _, err := put(t, srv, "42", "500", "40", "X-Answer", "500")
	if resp.StatusCode != 500 || err != nil || balance() != "200" {
		t.Fatalf("a 500 after the update: %d %v, balance %q", resp.StatusCode, err, balance())
	}
	if h, err := f.Highest(ctx, "accounts/42"); h != 34 || err != nil {
		t.Fatalf("highest %v %v", h, err)
	}
}

// TestZooKeeperFenceInput: fencezk.Fence refuses a resource that is not
// one znode name (400 bad-resource), a bad operation fails the write (500,
// nothing recorded), and AddOps works only inside a write.
func TestZooKeeperFenceInput(t *testing.T) {
	cl := zktest.Shared(t)
	s := rtest.Connect(t, cl, zookeeper.WithLogger(quiet))
	f, err := fencezk.NewFence(s, "/fences")
	if err != nil {
		t.Fatal(err)
	}
	if err := fencezk.AddOps(context.Background()); !errors.Is(err, fencezk.ErrNoBatch) {
		t.Fatalf("AddOps outside a write: %v", err)
	}
	var leaked context.Context
	srv := serveAs(t, f, func(r *http.Request) string { return r.URL.Query().Get("r") }, func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Context()
		fencezk.AddOps(r.Context(), &zk.SetDataRequest{Path: "/no/such/node", Version: -1})
	})
	for _, name := range []string{"a/b", "..", "."} {
		resp, _, err := put(t, srv, "x?r="+name, "", "5")
		if resp.StatusCode != 400 || !errors.Is(err, fence.ErrBadResource) {
			t.Fatalf("%q: %d %v", name, resp.StatusCode, err)
		}
	}
	resp, _, err := put(t, srv, "x?r=ok", "", "5")
	if resp.StatusCode != 500 || !errors.Is(err, fencehttp.ErrRefused) {
		t.Fatalf("a refused op: %d %v", resp.StatusCode, err)
	}
	r, _ := f.Register("ok")
	if v, err := r.Read(context.Background()); err != nil || v.Token != 0 {
		t.Fatalf("recorded %v after a refused op (%v)", v.Token, err)
	}
	if err := fencezk.AddOps(leaked, &zk.DeleteRequest{Path: "/x"}); !errors.Is(err, fencezk.ErrNoBatch) {
		t.Fatalf("AddOps after the write: %v", err)
	}
}
