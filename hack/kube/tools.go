//go:build tools

// Package kube pins the real Kubernetes control plane that end-to-end tests run
// against: kube-apiserver, kube-controller-manager and kube-scheduler from
// k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server/v3 (the version
// k8s.io/kubernetes itself requires). The blank imports below keep `go mod tidy`
// from dropping the requirements; the Makefile builds each command with
// `go build -o` from this directory (make kube-bins).
//
// kwok (sigs.k8s.io/kwok/cmd/kwok) shares the module: it is released against
// k8s.io/* v0.36 and builds unchanged against the v0.37 staging modules pinned
// here, so one build graph serves all five commands.
package kube

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
