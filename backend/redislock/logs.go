package redislock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/userinfo"
)

// go-redis logs some events itself (a failed dial, a connection it
// retires, a pub/sub connection it replaces) through one logger for the
// whole process, by default the standard library's on stderr: past
// WithLogger, its level and any scrubbing of the program's. This package
// replaces that logger once, when it is initialized (redis.SetLogger is
// safe at any time; a program's own later call wins), with goRedisLog:
// each line goes at DEBUG to the logger of every live Session (from the
// start of Connect or NewSession until Close), scrubbed of every live
// Session's password (userinfo.Scrub). go-redis does not say which client
// a line is about, so with several Sessions each of their loggers gets
// every line (once per logger); with none live, the line is dropped. What
// such a line reports is in the errors this package returns too.
func init() { redis.SetLogger(goRedisLog{}) }

// logSink is a live Session's logger and the secrets to scrub.
type logSink struct {
	log     *slog.Logger
	secrets []string
}

// sinks are the live Sessions' log sinks.
var sinks struct {
	mu  sync.Mutex
	all map[*logSink]struct{}
}

// watchLogs makes log receive go-redis's lines, scrubbed of secrets, until
// the returned function is called.
func watchLogs(log *slog.Logger, secrets []string) (stop func()) {
	k := &logSink{log: log, secrets: secrets}
	sinks.mu.Lock()
	defer sinks.mu.Unlock()
	if sinks.all == nil {
		sinks.all = make(map[*logSink]struct{})
	}
	sinks.all[k] = struct{}{}
	return func() {
		sinks.mu.Lock()
		defer sinks.mu.Unlock()
		delete(sinks.all, k)
	}
}

// goRedisLog is go-redis's logger while this package is loaded.
type goRedisLog struct{}

// Printf logs go-redis's line (format, v) as described at init.
func (goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	sinks.mu.Lock()
	var logs []*slog.Logger
	var secrets []string
	for k := range sinks.all {
		if !slices.Contains(logs, k.log) {
			logs = append(logs, k.log)
		}
		secrets = append(secrets, k.secrets...)
	}
	sinks.mu.Unlock()
	if len(logs) == 0 {
		return
	}
	line := userinfo.Scrub(fmt.Sprintf(format, v...), secrets...)
	for _, l := range logs {
		l.Log(ctx, slog.LevelDebug, "redislock: go-redis says", "line", line)
	}
}
