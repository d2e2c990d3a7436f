package etcdlock_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// TestMain stops the shared server after the tests and checks for leaked
// goroutines.
func TestMain(m *testing.M) { etcdtest.Main(m) }
