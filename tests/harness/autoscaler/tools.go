//go:build tools

// Package tools pins the cluster-autoscaler that the TypeScript tests run against plugpool (see
// build.sh); nothing here is compiled into plugpool.
package tools

import (
	_ "k8s.io/autoscaler/cluster-autoscaler"
)
