package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// waitHealthy polls the server's /health until it reports healthy, the
// process exits, or ctx ends.
func waitHealthy(ctx context.Context, client string, tlsCfg *tls.Config, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: time.Second}
	if tlsCfg != nil {
		hc.Transport = &http.Transport{TLSClientConfig: tlsCfg}
	}
	defer hc.CloseIdleConnections()
	for {
		err := health(ctx, hc, client)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("the server exited")
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %v (%w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// health asks the server at client (http://host:port) once for /health and
// returns nil if it reports itself healthy (a member with a leader).
func health(ctx context.Context, hc *http.Client, client string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"true"`) {
		return fmt.Errorf("health: %s %s", resp.Status, body)
	}
	return nil
}
