package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/userinfo"
)

// No output of zkrecipes shows a password it was given. The secrets it
// knows of are those of --servers (or ZK_SERVERS: a URL's user information,
// a query parameter or keyword named like a password, see
// internal/userinfo), PGPASSWORD and ZooKeeper's digest credentials
// (--auth-file or ZK_AUTH); each backend hides its own driver's
// errors (pglock also the password file's password). Every log line goes
// through scrubbing, so that an error text a backend or a driver made
// cannot carry one past this point either.

// secrets returns the passwords of c's servers and of the environment.
func (c *common) secrets() []string {
	s := userinfo.Secrets(c.servers)
	if pw := os.Getenv("PGPASSWORD"); pw != "" {
		s = append(s, pw)
	}
	if _, pw, ok := strings.Cut(string(c.sec.digest), ":"); ok && pw != "" {
		s = append(s, pw)
	}
	return s
}

// scrubbing returns a slog ReplaceAttr that runs next (if not nil) and then
// takes secrets out of the attribute's text: a string, an error's message,
// or any other value as fmt prints it (turned into a string only if it
// held one). The message is an attribute too (slog.MessageKey).
func scrubbing(secrets []string, next func([]string, slog.Attr) slog.Attr) func([]string, slog.Attr) slog.Attr {
	return func(groups []string, a slog.Attr) slog.Attr {
		if next != nil {
			a = next(groups, a)
		}
		if len(secrets) == 0 {
			return a
		}
		var text string
		switch a.Value.Kind() {
		case slog.KindString:
			text = a.Value.String()
		case slog.KindAny:
			if err, ok := a.Value.Any().(error); ok {
				text = err.Error()
			} else {
				text = fmt.Sprint(a.Value.Any())
			}
		default:
			return a
		}
		if s := userinfo.Scrub(text, secrets...); s != text {
			a.Value = slog.StringValue(s)
		}
		return a
	}
}

// hide returns text (a part of servers, or a message that may quote one)
// with the passwords of servers taken out.
func hide(servers, text string) string { return userinfo.Scrub(text, userinfo.Secrets(servers)...) }

// logger returns the logger of the flags (every line scrubbed of the
// secrets), having warned with it about secret files others may read.
func (c *common) logger(stderr io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.logLevel)) // checked by check
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: scrubbing(c.secrets(), durationText)}
	var log *slog.Logger
	if c.logFormat == "json" {
		// Node data and names in records (a holder's data) may hold what a
		// terminal obeys: the text handler quotes them, jsonWriter escapes
		// what JSON leaves as it is.
		log = slog.New(slog.NewJSONHandler(jsonWriter{stderr}, opts))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, opts))
	}
	warnLoose(log, c.sec.file, c.tls.keyFile)
	return log
}

// durationText logs a duration as Go writes it ("1.5s", "250ms"), in JSON
// too, where slog would give a number of nanoseconds without a unit.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
