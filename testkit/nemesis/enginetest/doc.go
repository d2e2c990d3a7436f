// Package enginetest tests the nemesis engine (package testkit/nemesis) on
// backend/memlock, an in-memory backend, so that the engine's generic parts
// (the scheduler, the client faults through the proxies, pause-client, the
// registers, the Margins, the leftovers) are tested without a server. Its
// tests run with the rest of the suite rather than in the ZooKeeper short
// run, which make test runs on its own.
package enginetest
