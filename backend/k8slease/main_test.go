package k8slease_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
)

// TestMain stops the shared cluster after the tests and checks for leaked
// goroutines (watches and renewals included).
func TestMain(m *testing.M) { k8stest.Main(m) }
