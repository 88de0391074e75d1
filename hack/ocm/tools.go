//go:build tools

// Package ocm pins Open Cluster Management, the peer that
// test/bench's BenchmarkOCM runs beside Canopy on the same real clusters:
// `registration-operator agent` (the klusterlet agent: registration and
// work in one process) and `registration controller` (the hub's
// registration controller), from open-cluster-management.io/ocm.
//
// go.mod and go.sum are OCM's own, with this module's path and OCM itself
// required: OCM is built against exactly the dependencies it was
// released with, and `go mod tidy` is not run here (it asks the checksum
// database about modules of OCM's test graph that it has no entry for).
// The Makefile builds each command with `go build -o` from this
// directory (make ocm-bins); BenchmarkOCM reads the hub and klusterlet
// CRDs from this module's copy of OCM (`go list -m`).
package ocm

import (
	_ "open-cluster-management.io/ocm/cmd/registration"
	_ "open-cluster-management.io/ocm/cmd/registration-operator"
)
