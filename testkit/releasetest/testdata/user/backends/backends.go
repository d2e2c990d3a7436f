// Package backends imports the etcd, PostgreSQL, Redis and Kubernetes backends, the
// Prometheus and OpenTelemetry adapters and the etcd, Redis and SQL fences,
// so that they compile in the user's module graph (go build ./...) without
// being linked into the program.
package backends

import (
	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/metrics/otelmetrics"
	"github.com/zkrecipes/zkrecipes/metrics/prommetrics"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
	"github.com/zkrecipes/zkrecipes/resource/fencesql"
)

// Connect holds each backend's Connect: the swap from ZooKeeper is the
// same two lines with another address.
var Connect = []any{etcdlock.Connect, pglock.Connect, redislock.Connect, k8slease.Connect}

// Metrics holds the Prometheus and OpenTelemetry adapters' constructors.
var Metrics = []any{prommetrics.New, otelmetrics.New}

// Fences holds the etcd, Redis and SQL fences' constructors.
var Fences = []any{fenceetcd.New, fenceredis.New, fencesql.New}
