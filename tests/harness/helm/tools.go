//go:build tools

// Package tools pins the Helm binary the deployment tests run to render cluster-autoscaler's official chart
// (see build.sh); nothing here is compiled into plugpool.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
