package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fence"
)

// slowCommit makes every COMMIT of a transaction that inserted into table
// slow take about 3 s: a deferred constraint trigger sleeps at commit time,
// and a cancel request only shortens its sleep (the commit still lands).
func slowCommit(t *testing.T, db *sql.DB) {
	mustExec(t, db, "CREATE TABLE slow (k TEXT PRIMARY KEY)",
		`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			BEGIN
				PERFORM pg_sleep(3);
			EXCEPTION WHEN query_canceled THEN
				PERFORM pg_sleep(0.5);
			END;
			RETURN NULL;
		END $$`,
		"CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON slow DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()")
}

// TestContextEndsDuringCommit: a context that ends while the COMMIT is in
// flight (a lease's context, ended because ownership is in doubt) gives an
// error matching fence.ErrUncertain and the context's error, never a plain
// context error (which promises nothing was committed); the commit goes on
// and lands, its connection back in the pool.
func TestContextEndsDuringCommit(t *testing.T) {
	db := openPostgres(t)
	f := newFence(t, db)
	slowCommit(t, db)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	err := f.Do(ctx, "uncertain-ctxcancel", 7, func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO slow (k) VALUES ('by 7')")
		// The COMMIT is sent right after fn returns, and takes 3 s.
		time.AfterFunc(time.Second, func() { cancelled = time.Now(); cancel() })
		return err
	})
	returned := time.Now()
	if !errors.Is(err, fence.ErrUncertain) || !errors.Is(err, context.Canceled) {
		t.Fatalf("context cancelled during the commit: %v; want fence.ErrUncertain and context.Canceled", err)
	}
	t.Logf("returned %v after the cancel: %v", returned.Sub(cancelled), err)

	// The commit lands: the outcome was truly uncertain, not "nothing".
	deadline := time.Now().Add(30 * time.Second)
	for highest(t, f, "uncertain-ctxcancel") != 7 || count(t, db, "SELECT * FROM slow") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the commit never landed: highest %v, rows %d", highest(t, f, "uncertain-ctxcancel"), count(t, db, "SELECT * FROM slow"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Its connection went back to the pool: wait for it to be idle, so
	// that nothing of the commit outlives the test.
	for db.Stats().InUse != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the commit's connection is still in use: %+v", db.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
