// Package observability checks the dashboard and alert rules that ship in
// deploy/: deploy/grafana/canopy.json and deploy/prometheus/canopy-rules.yaml.
//
// # What it owns
//
//   - That every PromQL expression of the dashboard (panel targets and
//     template variable queries) and of the rules parses with the
//     Prometheus parser, and that the rule file passes Prometheus' own
//     rule file checks (rulefmt) and carries what an operator needs on
//     each alert (for, severity, summary, description).
//   - That every metric the dashboard and the rules name is exported by a
//     running tree of relay processes: a root, a region and an edge.
//
// # What it must not do
//
// It is a module of its own (test/observability/go.mod, run by make test)
// because the Prometheus server module, where the PromQL parser and
// rulefmt live, would raise about forty versions in the main go.mod
// (golang.org/x/net, grpc, OpenTelemetry...) that the relay is built
// with. It requires the main module only for its test helpers
// (test/relaybin, test/procs, test/poll), and runs the relay as a
// process: nothing of the relay is linked with those versions.
package observability
