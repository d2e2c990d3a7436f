package isnil

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type locker interface{ Lock() }

type ptrLock struct{}

func (*ptrLock) Lock() {}

type valLock struct{}

func (valLock) Lock() {}

type funcLock func()

func (f funcLock) Lock() { f() }

// TestIs: a nil interface and typed nils are nil; values, and pointers to
// values, are not.
func TestIs(t *testing.T) {
	var p *ptrLock
	var f funcLock
	for _, c := range []struct {
		name string
		l    locker
		want bool
	}{
		{"nil", nil, true},
		{"typed nil pointer", p, true},
		{"nil func", f, true},
		{"pointer", &ptrLock{}, false},
		{"value", valLock{}, false},
		{"func", funcLock(func() {}), false},
	} {
		if got := Is(c.l); got != c.want {
			t.Errorf("%s: Is = %v, want %v", c.name, got, c.want)
		}
	}
}
