package zkname

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const guid = "0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name  string
		kinds []string
		want  Name
		ok    bool
	}{
		{"_c_" + guid + "-lock-0000000007", []string{"lock-"}, Name{GUID: guid, Kind: "lock-", Seq: 7}, true},
		{"_c_" + guid + "-read-@0000000003@0000000009", []string{"read-"}, Name{GUID: guid, Kind: "read-", Seq: 9, Anchored: true, Anchor: 3}, true},
		{"_c_" + guid + "-lock--2147483648", []string{"lock-"}, Name{GUID: guid, Kind: "lock-", Seq: -2147483648}, true},
		{"_c_" + guid + "-lock-0000000007", []string{"read-"}, Name{}, false}, // another kind
		{"_c_" + guid + "-lock-000000007", []string{"lock-"}, Name{}, false},  // not %010d
		{"_c_" + strings.ToUpper(guid) + "-lock-0000000007", []string{"lock-"}, Name{}, false},
		{MarkerName, []string{"lock-"}, Name{}, false},
	} {
		got, ok := Parse(c.name, c.kinds)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q, %q) = %+v, %v; want %+v, %v", c.name, c.kinds, got, ok, c.want, c.ok)
		}
	}
}

func TestKind(t *testing.T) {
	for name, want := range map[string]string{
		"_c_" + guid + "-lock-0000000007":             "lock-",
		"_c_" + guid + "-x-1-0000000007":              "x-1-",
		"_c_" + guid + "-read-@0000000003@0000000009": "read-",
		"_c_" + guid + "-0000000007":                  "",
		"lock-0000000007":                             "",
		MarkerName:                                    "",
	} {
		if got := Kind(name); got != want {
			t.Errorf("Kind(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for p, reserved := range map[string]bool{
		"/locks/a": false,
		"/locks/_c_" + guid + "-lock-0000000007/x": true,
		"/locks/" + MarkerName:                     true,
		"/locks/_c_x":                              false,
	} {
		why, res := CheckPath(p)
		if res != reserved || (why != "") != reserved {
			t.Errorf("CheckPath(%q) = %q, %v; want reserved %v", p, why, res, reserved)
		}
	}
	for _, p := range []string{"", "a", "/", "/a/", "/a//b", "/a/../b", "/zookeeper/x", "/a\x00", "/\xff"} {
		if why, res := CheckPath(p); why == "" || res {
			t.Errorf("CheckPath(%q) = %q, %v; want refused, not as reserved", p, why, res)
		}
	}
	if why, res := CheckSequentialPath("/P/_c_" + guid + "-lock-"); why == "" || !res {
		t.Errorf("CheckSequentialPath of a queue node's prefix = %q, %v; want refused as reserved", why, res)
	}
	if why, _ := CheckSequentialPath("/P/job-"); why != "" {
		t.Errorf("CheckSequentialPath(/P/job-) = %q, want accepted", why)
	}
}

func TestSeqRoundTrip(t *testing.T) {
	for _, v := range []int32{0, 7, -1, 2147483647, -2147483648} {
		s := string(AppendSeq(nil, v))
		if got, ok := ParseSeq(s); !ok || got != v {
			t.Errorf("ParseSeq(%q) = %d, %v; want %d", s, got, ok, v)
		}
	}
}
