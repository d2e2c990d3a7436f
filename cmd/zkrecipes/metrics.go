package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// metricsServer serves /metrics when --metrics-addr is set; the zero value
// (no address) does nothing.
type metricsServer struct {
	m    *prommetrics.Metrics
	srv  *http.Server
	done chan struct{}
}

// startMetrics listens on addr (nothing when addr is empty) and serves the
// session's metrics, Go runtime and process metrics at /metrics. A listen
// error is a usage error.
func startMetrics(addr string, log *slog.Logger) (*metricsServer, int) {
	if addr == "" {
		return &metricsServer{}, -1
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("--metrics-addr: cannot listen", "addr", addr, "err", err)
		return nil, exitUsage
	}
	reg := prometheus.NewRegistry()
	m := prommetrics.New()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ms := &metricsServer{m: m, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(ms.done)
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/metrics")
	return ms, -1
}

// option installs the metrics on a Session (none when off).
func (ms *metricsServer) option() []zookeeper.Option {
	if ms.m == nil {
		return nil
	}
	return []zookeeper.Option{zookeeper.WithMetrics(ms.m)}
}

// metrics returns the hook for another backend's session (nil when off:
// never a typed nil).
func (ms *metricsServer) metrics() recipe.Metrics {
	if ms == nil || ms.m == nil {
		return nil
	}
	return ms.m
}

// close stops the server (waiting up to 2 s for scrapes in progress).
func (ms *metricsServer) close() {
	if ms.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ms.srv.Shutdown(ctx)
	<-ms.done
}
