package etcdnem

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
)

// watcherGauge is etcd's count of a member's watchers (mvcc), on its
// /metrics page.
const watcherGauge = "etcd_debugging_mvcc_watcher_total"

// watchers returns the sum over c's members of their watcher counts: a
// watch a closed client left open on a member shows there.
func watchers(ctx context.Context, c *etcdtest.Cluster) (int, error) {
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	total := 0
	for _, ep := range c.DirectEndpoints() {
		n, err := watcherCount(ctx, hc, "http://"+ep+"/metrics")
		if err != nil {
			return 0, fmt.Errorf("etcdnem: watchers of %s: %w", ep, err)
		}
		total += n
	}
	return total, nil
}

func watcherCount(ctx context.Context, hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), watcherGauge+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s on the page", watcherGauge)
}
