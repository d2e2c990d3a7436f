package zookeeper

import (
	"errors"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestValidatePath(t *testing.T) {
	good := []string{"/a", "/locks/job-1", "/a/b/c", "/zookeeperx", "/ünïcode", "/a.b"}
	for _, p := range good {
		if err := validatePath(p); err != nil {
			t.Errorf("validatePath(%q) = %v, want nil", p, err)
		}
	}
	bad := []string{"", "a", "a/b", "/", "/a/", "/a//b", "/a/./b", "/a/..", "/zookeeper", "/zookeeper/quota",
		"/a\x00b", "/a\x01", "/a\x1f", "/a\u007f", "/\xff\xfe", "/emoji\U0001F600"}
	for _, p := range bad {
		err := validatePath(p)
		var pe *PathError
		if !errors.Is(err, recipe.ErrInvalidPath) || !errors.As(err, &pe) || pe.Path != p || pe.Reason == "" {
			t.Errorf("validatePath(%q) = %v, want a *PathError matching ErrInvalidPath", p, err)
		}
	}
}

func TestSplitServers(t *testing.T) {
	cases := []struct {
		in     []string
		hosts  []string
		chroot string
		bad    bool
	}{
		{[]string{"127.0.0.1:2181"}, []string{"127.0.0.1:2181"}, "", false},
		{[]string{"a:1", "b:2/app"}, []string{"a:1", "b:2"}, "/app", false},
		{[]string{"a:1,b:2/app/x"}, []string{"a:1", "b:2"}, "/app/x", false},
		{[]string{"a:1/"}, []string{"a:1"}, "", false},
		{[]string{"a:1/app", "b:2/other"}, nil, "", true},
		{[]string{"a:1/app/"}, nil, "", true},
		{[]string{"/app"}, nil, "", true},
		{[]string{"zk1,127.0.0.1/app"}, []string{"zk1:2181", "127.0.0.1:2181"}, "/app", false},
		{[]string{"[::1]", "::1", "[::1]:2182"}, []string{"[::1]:2181", "[::1]:2181", "[::1]:2182"}, "", false},
	}
	for _, c := range cases {
		hosts, chroot, err := splitServers(c.in)
		if c.bad {
			if !errors.Is(err, recipe.ErrInvalidPath) {
				t.Errorf("splitServers(%q) err = %v, want ErrInvalidPath", c.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(hosts, c.hosts) || chroot != c.chroot {
			t.Errorf("splitServers(%q) = %q, %q, %v", c.in, hosts, chroot, err)
		}
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/a", "/a//b", "/zookeeper", "", "/a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if err := validatePath(p); err != nil && !errors.Is(err, recipe.ErrInvalidPath) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
