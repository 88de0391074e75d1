// Package deploy tests what deploy/ installs: the Helm chart
// (deploy/helm/canopy) rendered with Helm's Go SDK for each meaningful
// combination of values, its schema refusing bad values by name, the
// kustomize overlays (deploy/kustomize) built with krusty and equal to
// the chart's renderings, every rendering applied with server-side dry run
// to a real kube-apiserver (test/kubecluster), the systemd units
// (deploy/systemd) checked against `relay --help` of their role, and an
// edge relay running with exactly the chart's RBAC, in-cluster, against a
// real kube-apiserver.
//
// It is a module of its own (Helm and kustomize bring a large tree of
// dependencies that the relay does not link); `make test` runs it.
package deploy
