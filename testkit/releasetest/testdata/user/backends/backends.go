// Package backends imports the etcd, PostgreSQL, Redis and Kubernetes backends, the
// OpenTelemetry adapter and the etcd and Redis fences, so that they
// compile in the user's module graph (go build ./...) without being
// linked into the program.
package backends

import (
	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/k8slease"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/metrics/otelmetrics"
	"github.com/zkrecipes/zkrecipes/resource/fenceetcd"
	"github.com/zkrecipes/zkrecipes/resource/fenceredis"
)

// Connect holds each backend's Connect: the swap from ZooKeeper is the
// same two lines with another address.
var Connect = []any{etcdlock.Connect, pglock.Connect, redislock.Connect, k8slease.Connect}

// Metrics is the OpenTelemetry adapter's constructor.
var Metrics = otelmetrics.New

// Fences holds the etcd and Redis fences' constructors.
var Fences = []any{fenceetcd.New, fenceredis.New}
