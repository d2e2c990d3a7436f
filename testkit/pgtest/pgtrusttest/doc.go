// Package pgtrusttest holds the tests of internal/pgtrust (the trust
// checks of resource/fencesql and backend/pglock) against a real
// PostgreSQL: here, in testkit/pgtest's module, so that the root module,
// which holds internal/pgtrust, does not require the pgx driver for its
// tests. It has no code of its own.
package pgtrusttest
