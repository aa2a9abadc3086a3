//go:build tools

// Package tools pins the control-plane binaries the TypeScript tests run (see build.sh);
// nothing here is compiled into plugpool.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
