package userinfo

import (
	"errors"
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
		"zk:S3cret@127.0.0.1:2181/app":                         "zk:xxxxx@127.0.0.1:2181/app",
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

// TestRedactQueryAndKeywords: a password in a URL's query (PostgreSQL's
// ?password= and ?sslpassword=, under any spelling pgx decodes) or in a
// keyword/value string, quoted, escaped or cut short, never survives.
func TestRedactQueryAndKeywords(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@db/app?password=S3cret&sslmode=require":   "postgres://u@db/app?password=xxxxx&sslmode=require",
		"postgres://u@db/app?sslmode=require&pass%77ord=S3cret": "postgres://u@db/app?sslmode=require&pass%77ord=xxxxx",
		"postgres://u:S3cret@db/app?sslpassword=S3cret2":        "postgres://u:xxxxx@db/app?sslpassword=xxxxx",
		"postgres:///app?host=/run/pg&PASSWORD=S3cret":          "postgres:///app?host=/run/pg&PASSWORD=xxxxx",
		"postgres://u@db/app?password=S3#cret":                  "postgres://u@db/app?password=xxxxx#xxxxx",
		"redis://h:1/0?client_name=x&token=S3cret":              "redis://h:1/0?client_name=x&token=xxxxx",
		"postgres://u:pa?ss@db/app?password=S3cret":             "postgres://u:xxxxx@db/app?password=xxxxx",
		"host=db password=S3cret dbname=app":                    "host=db password=xxxxx dbname=app",
		"host=db password = 'S3 cret' dbname=app":               "host=db password = xxxxx dbname=app",
		`host=db password='S3\' cret\\' dbname=app`:             "host=db password=xxxxx dbname=app",
		`host=db password=S3\ cret dbname=app`:                  "host=db password=xxxxx dbname=app",
		"host=db password='S3 cret":                             "host=db password=xxxxx",
		"password=S3cret":                                       "password=xxxxx",
		"  host=db\tsslpassword=S3cret\nuser=u":                 "  host=db\tsslpassword=xxxxx\nuser=u",
		"host=db password S3cret=x":                             "host=db xxxxx",
		"host=db user=u":                                        "host=db user=u",
		"zk1:2181,zk2:2181/app=x":                               "zk1:2181,zk2:2181/app=x",
		"postgres://u@db/app?sslmode=require":                   "postgres://u@db/app?sslmode=require",
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

// TestSecrets: Secrets lists each password as written and as a driver reads
// it, and the parts a misreading driver may quote; Scrub and Hide take them
// out of any text.
func TestSecrets(t *testing.T) {
	for in, want := range map[string][]string{
		"redis://:S3%2Fcret@h:1":              {"S3%2Fcret", "S3/cret", "cret"},
		"redis://u:pa/ssword@h:1":             {"pa/ssword", "ssword"},
		`host=h password='S3\' cret'`:         {`'S3\' cret'`, "S3' cret"},
		"postgres://h/db?password=S3+cr%20et": {"S3+cr%20et", "S3 cr et"},
		"zk1:2181/app":                        nil,
		"host=h password=":                    nil,
	} {
		got := Secrets(in)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("Secrets(%q) = %q, want %q", in, got, want)
		}
	}
	const text = `dial "u:pa": host u:pa/ssword unknown; ssword`
	if got := Scrub(text, Secrets("redis://u:pa/ssword@h:1")...); strings.Contains(got, "ssword") {
		t.Errorf("Scrub = %q, shows a part of the password", got)
	}
	inner := errors.New("auth failed for S3cret")
	err := Hide(inner, "S3cret", "")
	if !errors.Is(err, inner) || strings.Contains(err.Error(), "S3cret") || err.Error() != "auth failed for xxxxx" {
		t.Errorf("Hide: %v (Is %v), want the inner error's text scrubbed and Is to see it", err, errors.Is(err, inner))
	}
	if Hide(inner) != inner || Hide(inner, "") != inner || Hide(nil, "x") != nil {
		t.Error("Hide with no secret or no error must return the error as it is")
	}
}

// TestRedactRepeated: a password that also sits in another parameter is
// hidden there too.
func TestRedactRepeated(t *testing.T) {
	in := "redis://u:S3cret@h:1/0?dial_timeout=xS3cret"
	if got, want := Redact(in), "redis://u:xxxxx@h:1/0?dial_timeout=xxxxxx"; got != want {
		t.Errorf("Redact(%q) = %q, want %q", in, got, want)
	}
}

// TestShortSecretsNotSearched: a secret shorter than 4 bytes is not looked
// for in a text (Scrub, Hide, Redact's second pass): it would be found
// inside ordinary words, and the masks would spell it out ("on" in
// "session connected"). Redact still hides it where it stands.
func TestShortSecretsNotSearched(t *testing.T) {
	const msg = "session connected: cannot connect to Redis, revoke-on-suspend"
	if got := Scrub(msg, "on", "e", "abc", ""); got != msg {
		t.Errorf("Scrub with short secrets = %q, want the text as it was", got)
	}
	if got := Scrub(msg+" S3cr", "on", "S3cr"); got != msg+" xxxxx" {
		t.Errorf("Scrub = %q, want only the 4-byte secret hidden", got)
	}
	inner := errors.New(msg)
	if Hide(inner, "on", "e") != inner {
		t.Error("Hide with only short secrets must return the error as it is")
	}
	for in, want := range map[string]string{
		"redis://:e@host:6379/0?client_name=e":        "redis://:xxxxx@host:6379/0?client_name=e",
		"postgres://u:on@host/db?application_name=on": "postgres://u:xxxxx@host/db?application_name=on",
		"host=db password=abc user=abc":               "host=db password=xxxxx user=abc",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
