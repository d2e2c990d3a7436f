package pgtrust

import (
	"context"
	"fmt"
	"strings"
)

// checker runs Check's rules on one resolved table.
type checker struct {
	ctx     context.Context
	q       Query
	t       Table
	trusted []string
	oid     string
}

// roleCols selects, for the role oid expression r, its name and whether it
// is trusted apart from the caller's list: the connecting role or a
// superuser. pg_database_owner stands for the database's owner.
func roleCols(r string) string {
	o := "(CASE WHEN " + r + eq + "(SELECT oid FROM pg_catalog.pg_roles WHERE rolname" + eq + "'pg_database_owner'::pg_catalog.name) " +
		"THEN (SELECT datdba FROM pg_catalog.pg_database WHERE datname" + eq + "pg_catalog.current_database()) ELSE " + r + " END)"
	return "COALESCE((SELECT rolname::pg_catalog.text FROM pg_catalog.pg_roles WHERE oid" + eq + o + "), 'PUBLIC'), " +
		"COALESCE((SELECT (rolsuper OR rolname" + eq + "CURRENT_USER)::pg_catalog.text FROM pg_catalog.pg_roles WHERE oid" + eq + o + "), 'false')"
}

// isTrusted reports whether the role of a roleCols pair is trusted.
func (c *checker) isTrusted(name, builtin string) bool {
	if builtin == "true" {
		return true
	}
	for _, r := range c.trusted {
		if r == name && name != "PUBLIC" {
			return true
		}
	}
	return false
}

func (c *checker) fail(format string, args ...any) error {
	return &Error{Table: c.t.Qualified, Reason: fmt.Sprintf(format, args...)}
}

// run applies the rules in order: schema owner, then (if the table exists)
// kind, owner, privileges, triggers, rules, row security.
func (c *checker) run() error {
	rows, err := c.q(c.ctx, "SELECT "+roleCols("n.nspowner")+" FROM pg_catalog.pg_namespace n WHERE n.nspname"+eq+"$1::pg_catalog.name", c.t.Schema)
	if err != nil || len(rows) == 0 {
		return err // no such schema: no table either, and CREATE will say so
	}
	if !c.isTrusted(rows[0][0], rows[0][1]) {
		return c.fail("its schema %q is owned by role %q, which could drop and replace it; trusted: the connecting role, superusers and %q",
			c.t.Schema, rows[0][0], c.trusted)
	}
	rows, err = c.q(c.ctx, "SELECT c.oid::pg_catalog.text, c.relkind::pg_catalog.text, c.relpersistence::pg_catalog.text, "+
		"(c.relrowsecurity OR c.relforcerowsecurity)::pg_catalog.text, "+roleCols("c.relowner")+
		" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid"+eq+"c.relnamespace"+
		" WHERE n.nspname"+eq+"$1::pg_catalog.name AND c.relname"+eq+"$2::pg_catalog.name", c.t.Schema, c.t.Name)
	if err != nil || len(rows) == 0 {
		return err
	}
	c.t.Exists = true
	r := rows[0]
	c.oid = r[0]
	switch {
	case r[1] != "r":
		return c.fail("it is not an ordinary table (relkind %q)", r[1])
	case r[2] != "p":
		return c.fail("it is not a permanent table (relpersistence %q: unlogged or temporary tables lose rows)", r[2])
	case !c.isTrusted(r[4], r[5]):
		return c.fail("it is owned by role %q, not by the connecting role, a superuser or a trusted role %q", r[4], c.trusted)
	case r[3] == "true":
		return c.fail("row level security is enabled on it")
	}
	if err := c.privileges(); err != nil {
		return err
	}
	return c.hooks()
}

// readOnly, appended to a privilege, is true unless it is one that lets
// another role read the table but not change its rows: SELECT, REFERENCES
// (a foreign key to it), MAINTAIN (PostgreSQL 17: VACUUM, ANALYZE, LOCK; it
// can delay, not change, writes). NOT IN would call an unqualified <>.
const readOnly = " OPERATOR(pg_catalog.<>) ALL ('{SELECT,REFERENCES,MAINTAIN}'::pg_catalog.text[])"

// privileges refuses a write privilege held by an untrusted role, on the
// table or on one of its columns.
func (c *checker) privileges() error {
	rows, err := c.q(c.ctx, "SELECT "+roleCols("a.grantee")+", a.privilege_type FROM pg_catalog.pg_class c, "+
		"pg_catalog.aclexplode(c.relacl) a WHERE c.oid"+eq+"$1::pg_catalog.oid AND a.privilege_type"+readOnly+
		" UNION ALL SELECT "+roleCols("a.grantee")+", pg_catalog.concat(a.privilege_type, ' (', att.attname, ')') "+
		"FROM pg_catalog.pg_attribute att, pg_catalog.aclexplode(att.attacl) a "+
		"WHERE att.attrelid"+eq+"$1::pg_catalog.oid AND a.privilege_type"+readOnly, c.oid)
	if err != nil {
		return err
	}
	var bad []string
	for _, r := range rows {
		if !c.isTrusted(r[0], r[1]) {
			bad = append(bad, r[2]+" to "+r[0])
		}
	}
	if len(bad) > 0 {
		return c.fail("privileges that allow writes are granted to untrusted roles: %s", strings.Join(bad, ", "))
	}
	return nil
}

// hooks refuses triggers, rules and policies: any of them can change or
// drop a write (a trusted owner has no reason to add them to such a table).
func (c *checker) hooks() error {
	rows, err := c.q(c.ctx, "SELECT 'trigger', tgname::pg_catalog.text FROM pg_catalog.pg_trigger WHERE tgrelid"+eq+"$1::pg_catalog.oid AND NOT tgisinternal"+
		" UNION ALL SELECT 'rule', rulename::pg_catalog.text FROM pg_catalog.pg_rewrite WHERE ev_class"+eq+"$1::pg_catalog.oid"+
		" UNION ALL SELECT 'policy', polname::pg_catalog.text FROM pg_catalog.pg_policy WHERE polrelid"+eq+"$1::pg_catalog.oid", c.oid)
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		var hs []string
		for _, r := range rows {
			hs = append(hs, fmt.Sprintf("%s %q", r[0], r[1]))
		}
		return c.fail("it has %s, which could change writes", strings.Join(hs, ", "))
	}
	return nil
}
