// Package differential runs one scenario against a root relay and against a
// real kube-apiserver and compares what both answer, step by step.
//
// The scenario (scenario_test.go) is a list of steps: kubectl commands, run
// with the target's kubeconfig (stdout, stderr and exit code are compared),
// and client-go calls (the object or the Status returned, and the warnings
// the server sent). Each step's output is normalized (normalize_test.go) so
// that what legitimately differs between two servers — uids, timestamps,
// resourceVersions, generated names, addresses, kubeconfig paths, the
// /spaces/<space> prefix — does not count.
//
// Differences that are understood are listed with their reason in the
// accepted table (differential_test.go) and in the "Differential test"
// section of docs/compat.md. The test fails on a difference that is not
// listed, on a listed difference that no longer occurs, and when that
// section does not list the same steps and the counts of the run, so both
// stay truthful. DIFFERENTIAL_REPORT=<dir> writes every step's outputs.
//
// The kube-apiserver and etcd are the binaries `make kube-bins` builds into
// bin/ (package test/kubecluster, Minimal: no controllers); kubectl comes
// from $KUBECTL or PATH. A missing binary fails the test. Both servers bind
// to 127.0.0.1 on random ports and stop when the test ends.
//
// The package owns no production code and must not fake either server.
package differential
