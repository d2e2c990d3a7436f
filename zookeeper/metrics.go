package zookeeper

import (
	"strings"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// WithMetrics installs m on the Session: the Session and every recipe
// created on it report their events to m (see recipe.Metrics). Default: none (a
// nil m means none).
func WithMetrics(m recipe.Metrics) Option { return func(c *config) { c.metrics = m } }

// metricKind is the node kind as recipe.Metrics reports it: without its trailing
// dash (no allocation).
func metricKind(kind string) string { return strings.TrimSuffix(kind, "-") }
