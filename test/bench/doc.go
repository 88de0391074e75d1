// Package bench is the load generator and report writer behind `make bench`
// (docs/benchmarks.md).
//
// The load generator (load.go) drives any Kubernetes-compatible API through
// client-go: creates, updates and gets from several concurrent clients
// without a client-side rate limit, lists of 100 and 10 000 ConfigMaps,
// watch fan-out (N watchers, one write, delivery latency) and a mixed load.
// The same code runs against a real kube-apiserver with etcd
// (test/kubecluster) and against Canopy roots with one and three replicas
// (bench_test.go, BenchmarkAPI), so the figures compare like with like.
//
// The report writer (report.go) parses `go test -bench` output (the
// benchstat text format) and the simulator's JSON lines, and renders the
// Markdown tables that cmd/benchreport writes into docs/benchmarks.md
// between the generated-region markers.
//
// The package must not start anything by itself: benchmarks run only with
// -bench, never in `go test ./...` without it.
package bench
