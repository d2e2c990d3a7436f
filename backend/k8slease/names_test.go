package k8slease

import (
	"errors"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// TestSplitName checks the namespace and name rules New applies before
// sending anything, and the typed errors of a refusal.
func TestSplitName(t *testing.T) {
	ok := []struct{ in, ns, name string }{
		{"lock", "default", "lock"},
		{"jobs/nightly.report", "jobs", "nightly.report"},
		{"a/b-c.d", "a", "b-c.d"},
		{strings.Repeat("n", 63) + "/" + strings.Repeat("x", 253), strings.Repeat("n", 63), strings.Repeat("x", 253)},
	}
	for _, c := range ok {
		ns, name, err := splitName(c.in, "default")
		if err != nil || ns != c.ns || name != c.name {
			t.Errorf("splitName(%q) = %q, %q, %v; want %q, %q", c.in, ns, name, err, c.ns, c.name)
		}
	}
	bad := []struct {
		in   string
		want error
	}{
		{"", ErrInvalidName},
		{"ns/", ErrInvalidName},
		{"/name", ErrInvalidNamespace},
		{"Upper", ErrInvalidName},
		{"a/b/c", ErrInvalidName},
		{"under_score", ErrInvalidName},
		{"-dash", ErrInvalidName},
		{"ns.dot/name", ErrInvalidNamespace},
		{strings.Repeat("n", 64) + "/x", ErrInvalidNamespace},
		{strings.Repeat("x", 254), ErrInvalidName},
		{"bad\x00nul", ErrInvalidName},
		{"\xff", ErrInvalidName},
		{strings.Repeat("x", MaxNameLen+1), ErrInvalidName},
	}
	for _, c := range bad {
		_, _, err := splitName(c.in, "default")
		var ne *NameError
		if !errors.Is(err, c.want) || !errors.Is(err, recipe.ErrInvalidPath) || !errors.As(err, &ne) {
			t.Errorf("splitName(%q) = %v; want a *NameError matching %v and recipe.ErrInvalidPath", c.in, err, c.want)
		}
	}
	for in, want := range map[string]string{
		"a/b/c":    `invalid lock name "a/b/c": more than one "/"`,
		"ns/Upper": `invalid lock name "ns/Upper": the Lease name "Upper" is not a DNS subdomain: at most 253 bytes`,
		"Bad/x":    `invalid lock name "Bad/x": the namespace "Bad" is not a DNS label: at most 63 bytes`,
		"/x":       `the namespace "" is empty`,
	} {
		if err := CheckName(in, "default"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckName(%q) = %v, want it to say %q", in, err, want)
		}
	}
	if err := CheckName("x", "Bad"); !errors.Is(err, ErrInvalidNamespace) {
		t.Errorf("CheckName with a bad default namespace = %v", err)
	}
}

// TestOptions checks that every bad option is refused with
// recipe.ErrBadOption and the defaults.
func TestOptions(t *testing.T) {
	c, err := buildConfig(nil)
	if err != nil || c.duration != DefaultLeaseDuration || c.namespace != DefaultNamespace || c.logger == nil {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	for name, o := range map[string]Option{
		"duration 0":          WithLeaseDuration(0),
		"duration 1.5s":       WithLeaseDuration(1500 * 1e6),
		"duration too long":   WithLeaseDuration(maxDuration + 1e9),
		"namespace empty":     WithNamespace(""),
		"namespace upper":     WithNamespace("Prod"),
		"identity long":       WithIdentity(strings.Repeat("i", MaxIdentityLen+1)),
		"identity control":    WithIdentity("a\nb"),
		"connect timeout 0":   WithConnectTimeout(0),
		"cleanup timeout < 0": WithCleanupTimeout(-1),
	} {
		if _, err := buildConfig([]Option{o}); !errors.Is(err, recipe.ErrBadOption) {
			t.Errorf("%s: %v, want recipe.ErrBadOption", name, err)
		}
	}
	if _, err := New(nil, "x"); !errors.Is(err, recipe.ErrBadOption) {
		t.Errorf("New(nil) = %v", err)
	}
}

// TestIdentity checks that identities are unique and keep their prefix.
func TestIdentity(t *testing.T) {
	a, b := newIdentity("pod-1"), newIdentity("pod-1")
	if a == b || !strings.HasPrefix(a, "pod-1_") {
		t.Errorf("identities %q, %q", a, b)
	}
	if h := newIdentity(""); h == "" || strings.HasPrefix(h, "_") {
		t.Errorf("default identity %q", h)
	}
}
