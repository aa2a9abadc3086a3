//go:build tools

// Package tools pins the Prometheus server and promtool that the monitoring tests run (see build.sh);
// nothing here is compiled into plugpool.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
