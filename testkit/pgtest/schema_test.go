package pgtest

import (
	"context"
	"database/sql"
	"testing"
)

// TestSchema: two Schemas of one test are apart (a table made in one is not
// seen from the other), both in the one scratch database, and each is
// dropped at its test's cleanup.
func TestSchema(t *testing.T) {
	ctx := context.Background()
	var names [2]string
	t.Run("two", func(t *testing.T) {
		a, b := Schema(t), Schema(t)
		if _, err := a.ExecContext(ctx, "CREATE TABLE x (n int)"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ExecContext(ctx, "SELECT n FROM x"); err == nil {
			t.Fatal("a table of one Schema is seen from the other")
		}
		for i, db := range []*sql.DB{a, b} {
			if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&names[i]); err != nil {
				t.Fatal(err)
			}
		}
		if names[0] == names[1] || names[0] == "public" || names[1] == "public" {
			t.Fatalf("schemas %q and %q: want two of their own", names[0], names[1])
		}
	})
	admin := open(t, scratch.dsn)
	var left int
	if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1 OR nspname = $2", names[0], names[1]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d of the schemas %q, %q left after their test", left, names[0], names[1])
	}
}
