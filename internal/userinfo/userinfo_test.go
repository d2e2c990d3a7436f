package userinfo

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRedact: the password never survives, whether or not the URL parses.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:S3cret@a:1,b:2/0":                            "redis://:xxxxx@a:1,b:2/0",
		"redis://:S3cret@/0":                                   "redis://:xxxxx@/0",
		"http://:S3cret@host":                                  "http://:xxxxx@host",
		"redis:/:S3cret@host:6379":                             "redis:/:xxxxx@host:6379",
		"redis://:S3 cret@host:6379":                           "redis://:xxxxx@host:6379",
		"redis://:S3/cret@host:6379":                           "redis://:xxxxx@host:6379",
		"redis://u:S3cret@h/p@q":                               "redis://u:xxxxx@q",
		"etcd://user:S3cret@127.0.0.1:1":                       "etcd://user:xxxxx@127.0.0.1:1",
		"postgres://cron:s3cr%40t@db:5432/app?sslmode=require": "postgres://cron:xxxxx@db:5432/app?sslmode=require",
		"postgres://u:a@b@db/app":                              "postgres://u:xxxxx@db/app",
		":S3cret@host":                                         ":xxxxx@host",
		"redis://user@cache":                                   "redis://user@cache",
		"etcd://e1:2379,e2:2379/app":                           "etcd://e1:2379,e2:2379/app",
		"zk1:2181/app":                                         "zk1:2181/app",
	} {
		got := Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "S3") || strings.Contains(got, "cret") {
			t.Errorf("Redact(%q) = %q shows the password", in, got)
		}
	}
}
