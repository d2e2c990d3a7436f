package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// hbaMu serializes the rewrites of a server's pg_hba.conf within the test
// binary.
var hbaMu sync.Mutex

// PasswordRole creates a login role as Role does, that must give password
// (SCRAM) on the server's loopback TCP connections, where every other role
// is trusted, and returns a URL for it, without the password, to the
// database of dsn (one Database returned; what role owns or was granted
// there is dropped at the test's cleanup). It is for tests of what a wrong
// or missing password does. It fails the test for an existing server
// (PG_TEST_DSN), whose pg_hba.conf pgtest does not touch.
func (s *Server) PasswordRole(tb testing.TB, dsn, password string) string {
	tb.Helper()
	role := s.Role(tb, tb.Name()+"_pw")
	tb.Cleanup(func() { // before Role's: what role owns or was granted in dsn's database
		if err := execOn(context.Background(), dsn, "DROP OWNED BY "+role); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.passwordRole(ctx, role, password); err != nil {
		tb.Fatalf("pgtest.PasswordRole: %v", err)
	}
	u, err := AsRole(dsn, role)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// passwordRole gives role password, puts SCRAM lines for it at the top of
// pg_hba.conf, reloads the configuration and waits until the server asks
// role for its password.
func (s *Server) passwordRole(ctx context.Context, role, password string) error {
	if s.cmd == nil {
		return errors.New("needs a server started by pgtest, not " + EnvDSN)
	}
	lit := "'" + strings.ReplaceAll(password, "'", "''") + "'"
	if err := s.exec(ctx, "ALTER ROLE "+role+" PASSWORD "+lit); err != nil {
		return errors.New("setting the role's password failed") // the error may quote the statement
	}
	hbaMu.Lock()
	defer hbaMu.Unlock()
	hba := s.dir + "/data/pg_hba.conf"
	old, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	lines := fmt.Sprintf("host all %[1]s 127.0.0.1/32 scram-sha-256\nhost all %[1]s ::1/128 scram-sha-256\n", role)
	if err := os.WriteFile(hba, append([]byte(lines), old...), 0o600); err != nil {
		return err
	}
	if err := s.exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	u, err := url.Parse(s.admin)
	if err != nil {
		return err
	}
	u.User = url.UserPassword(role, "not-the-password")
	for { // the reload is asynchronous
		c, err := pgconn.Connect(ctx, u.String())
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "28P01" { // invalid_password
			return nil
		}
		if err == nil {
			_ = c.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server does not ask %s for a password after a reload", role)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exec runs one statement on the maintenance database.
func (s *Server) exec(ctx context.Context, stmt string) error { return execOn(ctx, s.admin, stmt) }

// execOn runs one statement on the database of dsn.
func execOn(ctx context.Context, dsn, stmt string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmt)
	return err
}
