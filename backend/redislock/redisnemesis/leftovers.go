package redisnemesis

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Leftovers lists what the run's clients left after they all closed:
// holder keys (a lock still held or handed off) and queue keys (waiters
// still queued) under the run's base, the run's client connections still
// open, and its pub/sub channels still subscribed. The token counters are
// expected (they never expire and are never deleted: tokens must keep
// growing) and not listed.
func (t *Target) Leftovers(ctx context.Context) ([]string, error) {
	keys, err := t.keys(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if strings.HasSuffix(k, ":token") {
			continue
		}
		out = append(out, "key "+t.describeKey(ctx, k))
	}
	conns, chans, err := t.connections(ctx)
	if err != nil {
		return nil, err
	}
	return append(append(out, conns...), chans...), nil
}

// connections lists the run's client connections still open and its
// channels still subscribed.
func (t *Target) connections(ctx context.Context) (conns, chans []string, err error) {
	all, err := t.srv.Clients(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	names, pattern := t.names, t.prefix+t.base+"*"
	t.mu.Unlock()
	for _, c := range all {
		if strings.HasPrefix(c.Name, names) {
			kind := ""
			if c.Sub {
				kind = " (pub/sub)"
			}
			conns = append(conns, fmt.Sprintf("connection id=%d name=%s%s still open", c.ID, c.Name, kind))
		}
	}
	chs, err := t.admin.PubSubChannels(ctx, pattern).Result()
	if err != nil {
		return nil, nil, err
	}
	for _, ch := range chs {
		chans = append(chans, "channel "+ch+" still subscribed")
	}
	return conns, chans, nil
}

// describeKey says what key holds and for how long.
func (t *Target) describeKey(ctx context.Context, key string) string {
	typ, _ := t.admin.Type(ctx, key).Result()
	ttl, _ := t.admin.PTTL(ctx, key).Result()
	var val string
	switch typ {
	case "string":
		val, _ = t.admin.Get(ctx, key).Result()
	case "zset":
		members, _ := t.admin.ZRange(ctx, key, 0, -1).Result()
		val = fmt.Sprintf("%d queued %v", len(members), members)
	}
	left := "no expiry"
	if ttl >= 0 {
		left = "expires in " + ttl.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s = %s (%s, %s)", key, val, typ, left)
}

// Diagnose says what the server holds under the run's base (every key,
// the token counters included, with its expiry), and the run's
// connections and channels.
func (t *Target) Diagnose(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	keys, err := t.keys(ctx)
	if err != nil {
		return []string{"listing the keys: " + err.Error()}
	}
	var out []string
	for _, k := range keys {
		out = append(out, "key "+t.describeKey(ctx, k))
	}
	conns, chans, err := t.connections(ctx)
	if err != nil {
		return append(out, "listing the connections: "+err.Error())
	}
	return append(append(out, conns...), chans...)
}
